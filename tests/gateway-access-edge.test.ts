// Who may read an account's gateway, through the edge (Caddy): tokens, IP allowlists and CORS
// decided by the API for every read the edge serves from Kubo's gateway.
import { gatewayAccessCases } from './support/gateway-access-cases.js';

gatewayAccessCases('edge');
