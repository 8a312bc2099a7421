// Requests Go's HTTP server cannot parse, sent to the edge: answered in each surface's error
// shape (edge/caddy/errors.go), as the API processes answer them (tests/http.test.ts), not
// in Go's text/plain; a body that cannot be read is the reader's 400, not the service away;
// CONNECT is 405.
import { startEdgedApi, type EdgedApi } from './support/edge.js';
import { rawExchange, type RawAnswer } from './support/raw.js';
import { createUser } from './support/stack.js';

let edged: EdgedApi;
beforeAll(async () => {
  edged = await startEdgedApi();
});
afterAll(() => edged?.close());

type Surface = 'api' | 'gateway' | 's3';
const SURFACES: Surface[] = ['api', 'gateway', 's3'];

/** The error's reason (JSON) or code (S3's XML), after checking the answer's shape. */
function reasonOf(surface: Surface, answer: RawAnswer): string {
  if (surface === 's3') {
    expect(answer.headers['content-type']).toBe('application/xml');
    expect(answer.body).toMatch(/^<\?xml version="1\.0" encoding="UTF-8"\?>\s*<Error><Code>/);
    return /<Code>([^<]+)<\/Code>/.exec(answer.body)![1]!;
  }
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
  return (JSON.parse(answer.body) as { error: { reason: string } }).error.reason;
}

const host = (surface: Surface) => `localhost:${edged.ports[surface]}`;

test.each(SURFACES)(
  "the %s surface answers Go's own parse errors in its shape, with a length",
  async (surface) => {
    const port = edged.ports[surface];
    const badRequest = surface === 's3' ? 'InvalidRequest' : 'MALFORMED_REQUEST';
    const cases: [string, number, string][] = [
      ['a header line without a colon', 400, `GET / HTTP/1.1\r\nHost: ${host(surface)}\r\nNot A Header\r\n\r\n`],
      ['no Host', 400, 'GET / HTTP/1.1\r\nConnection: close\r\n\r\n'],
      ['an HTTP version that is not one', 400, `GET / HTTP/9.9\r\nHost: ${host(surface)}\r\n\r\n`],
      ['a URI that does not parse', 400, `GET /%zz HTTP/1.1\r\nHost: ${host(surface)}\r\n\r\n`],
      ['an unknown transfer coding', 400, `POST / HTTP/1.1\r\nHost: ${host(surface)}\r\nTransfer-Encoding: gzip\r\n\r\n`],
      ['headers over the limit', 431, `GET / HTTP/1.1\r\nHost: ${host(surface)}\r\nX-Big: ${'a'.repeat(1_100_000)}\r\n\r\n`],
    ];
    for (const [what, status, request] of cases) {
      const answer = await rawExchange(port, request);
      expect([what, answer.status]).toEqual([what, status]);
      expect(reasonOf(surface, answer)).toBe(status === 431 && surface !== 's3' ? 'HEADERS_TOO_LARGE' : badRequest);
      expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.body));
    }
    // A few bytes that are not HTTP are answered at once, not after the header timeout (10 s: with
    // h2c on, Go waited for 24 bytes of an HTTP/2 preface).
    const garbage = await rawExchange(port, 'GARBAGE\r\n\r\n');
    expect([garbage.status, reasonOf(surface, garbage)]).toEqual([400, badRequest]);
    expect(garbage.ms).toBeLessThan(5_000);
    // CONNECT is refused at the edge (proxied, it was 503 as if the service were away).
    const tunnel = await rawExchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expect([tunnel.status, reasonOf(surface, tunnel)]).toEqual([405, surface === 's3' ? 'MethodNotAllowed' : 'METHOD_NOT_ALLOWED']);
  },
  60_000,
);

test("a body that cannot be read is the reader's 400, and the API process behind it stays in rotation", async () => {
  const user = await createUser(edged.api);
  const malformed = [
    'POST /upload/new HTTP/1.1',
    `Host: ${host('api')}`,
    `X-Api-Key: ${user.apiKey}`,
    'Content-Type: application/octet-stream',
    'Transfer-Encoding: chunked',
    'Connection: close',
    '',
    '5\r\nhello\r\nzz\r\n',
  ].join('\r\n');
  const answer = await rawExchange(edged.ports.api, malformed);
  expect([answer.status, reasonOf('api', answer)]).toEqual([400, 'MALFORMED_REQUEST']);
  expect(answer.headers['retry-after']).toBeUndefined();
  // Nothing was stored, and the next requests reach the API process at once.
  expect((await edged.api.deps.db.files.model.countDocuments({ userId: user.userId }).exec()) as number).toBe(0);
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${edged.urls.api}/upload/list`, { headers: { 'X-Api-Key': user.apiKey } });
    expect(res.status).toBe(200);
  }
});
