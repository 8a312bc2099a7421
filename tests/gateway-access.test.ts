// Who may read an account's gateway, as the API process serves it (tests/support/gateway-access-cases.ts).
import { gatewayAccessCases } from './support/gateway-access-cases.js';

gatewayAccessCases('api');
