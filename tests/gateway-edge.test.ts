// The gateway's cases through the edge (Caddy): the access decision in the API, the bytes
// straight from Kubo's gateway, the bytes metered from the edge's reports.
import { gatewayCases } from './support/gateway-cases.js';

gatewayCases('edge');
