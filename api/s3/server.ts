// Starts the S3 interface on S3_PORT over the API process's components, with its own
// connection pool to Kubo's gateway (objects are read from it) and its memory of small objects.
import { createKuboGateway } from '../../infra/ipfs/kubo-gateway.js';
import type { Logger } from '../../infra/logger.js';
import type { UseCaseDeps } from '../../core/deps.js';
import { createAnswerMemory } from '../answers.js';
import { listen, type Listening } from '../listen.js';
import { createS3Handler } from './app.js';
import { S3Error } from './errors.js';
import { errorXml } from './xml.js';

export async function startS3(deps: UseCaseDeps & { logger: Logger }): Promise<Listening> {
  const { config } = deps;
  const kuboGateway = createKuboGateway(config.kubo.gatewayUrl, config.kubo.peerGatewayUrls);
  const app = createS3Handler({ ...deps, kuboGateway, answers: createAnswerMemory() });
  const xmlClientError = (_status: number, reason: string, details: string) => ({
    contentType: 'application/xml',
    body: errorXml(
      reason === 'METHOD_NOT_ALLOWED'
        ? new S3Error('MethodNotAllowed', 'The specified method is not allowed against this resource.')
        : new S3Error('InvalidRequest', details),
      '/',
      '0',
    ),
  });
  // `Expect: 100-continue` is answered by the handler once the signature holds (app.ts), so a
  // refused upload's body is never sent.
  const listening = await listen(app, config.api.host, config.s3.port, config.shutdownTimeoutMs, xmlClientError, true);
  // The process's own copy of the configuration (api/server.ts): the address is known now.
  config.s3.publicUrl ??= `http://${config.s3.domain}:${listening.port}`;
  return {
    ...listening,
    async close() {
      const ended = await listening.close();
      kuboGateway.close();
      return ended;
    },
  };
}
