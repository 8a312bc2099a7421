// The gateway against the real stack, as the API process serves it (tests/support/gateway-cases.ts).
import { gatewayCases } from './support/gateway-cases.js';

gatewayCases('api');
