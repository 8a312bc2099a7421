// The answers the edge gives itself, in each surface's error shape (the REST API's and the
// gateway's JSON, S3's XML), never Caddy's empty or text/plain ones: Kubo failing under a decided
// read, no API process to reach, a body the reader sent that could not be read, and CONNECT.
// Go's own answers to requests it cannot parse at all are rewritten by edge/caddy/errors.go.
import { block, type Surface } from './caddy-syntax.js';

/** The answer for a failure of Kubo's gateway, in the surface's error shape (api/gateway/errors.ts,
 * api/s3/errors.ts). For S3 every failure is the store's: the object's record said the bytes are there. */
export function kuboFailure(surface: Surface): string[] {
  if (surface === 's3') {
    const xml =
      '`<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>the content store could not read this object; retry later</Message></Error>`';
    // The object's headers, copied from the decision, do not describe an error.
    const objectHeaders = [
      'Etag',
      'Last-Modified',
      'Cache-Control',
      'Expires',
      'Content-Disposition',
      'Content-Encoding',
      'Content-Language',
      'Accept-Ranges',
      'X-Amz-Meta-*',
      'X-Amz-Checksum-*',
      'X-Amz-Mp-Parts-Count',
    ];
    return [
      '@failed status 3xx 4xx 5xx',
      ...block('handle_response @failed', [
        ...objectHeaders.map((h) => `header -${h}`),
        'header Content-Type application/xml',
        'header Cache-Control no-store',
        'header Retry-After 5',
        `respond ${xml} 503`,
      ]),
    ];
  }
  const json = (reason: string, details: string) => `\`{"error":{"reason":"${reason}","details":"${details}"}}\``;
  const respond = (status: string, reason: string, details: string) => [
    'header Content-Type "application/json; charset=utf-8"',
    'header Cache-Control no-store',
    `respond ${json(reason, details)} ${status}`,
  ];
  return [
    '@missing status 404',
    ...block('handle_response @missing', respond('404', 'NOT_FOUND', 'no such path in this content')),
    '@refused status 4xx',
    ...block(
      'handle_response @refused',
      respond('{rp.status_code}', 'BAD_REQUEST', 'the gateway cannot answer this request for this content'),
    ),
    '@failed status 5xx',
    ...block('handle_response @failed', [
      'header Retry-After 5',
      ...respond('502', 'UPSTREAM_FAILED', 'the content could not be read; retry later'),
    ]),
  ];
}

/**
 * What the edge answers when it cannot reach any API process (or Kubo for a decided read): the
 * service's 503 in each surface's error shape, never Caddy's empty 502. Every API process down
 * is a dependency gone for the reader, and a 503 with Retry-After is what clients retry.
 */
export function unavailable(surface: 'json' | 's3'): string[] {
  const contentType = `header Content-Type "${surface === 's3' ? 'application/xml' : 'application/json; charset=utf-8'}"`;
  const body =
    surface === 's3'
      ? '`<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>Service is unable to handle request.</Message></Error>`'
      : '`{"error":{"reason":"DEPENDENCY_UNAVAILABLE","details":"the service is not reachable; retry later"}}`';
  // A body the reader sent that could not be read (a malformed chunk, cut short): the reader's
  // error, as an API process answers it (edge/caddy/errors.go, stupa_body_errors).
  const unreadable =
    surface === 's3'
      ? '`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidRequest</Code><Message>the HTTP request could not be parsed (its body)</Message></Error>`'
      : '`{"error":{"reason":"MALFORMED_REQUEST","details":"the HTTP request could not be parsed (its body)"}}`';
  return [
    ...block('handle_errors 400', [contentType, 'header Cache-Control no-store', 'header Connection close', `respond ${unreadable} 400`]),
    ...block('handle_errors', [contentType, 'header Cache-Control no-store', 'header Retry-After 5', `respond ${body} 503`]),
  ];
}

/** CONNECT, answered here: proxied, it failed as if the service were away (503). An API process
 * answers it 405 on its own port too (api/listen.ts); no surface tunnels. */
export const noTunnel = (surface: 'json' | 's3') => [
  '@tunnel method CONNECT',
  ...block('handle @tunnel', [
    `header Content-Type "${surface === 's3' ? 'application/xml' : 'application/json; charset=utf-8'}"`,
    'header Connection close',
    surface === 's3'
      ? 'respond `<?xml version="1.0" encoding="UTF-8"?><Error><Code>MethodNotAllowed</Code><Message>The specified method is not allowed against this resource.</Message></Error>` 405'
      : 'respond `{"error":{"reason":"METHOD_NOT_ALLOWED","details":"CONNECT is not allowed here"}}` 405',
  ]),
];
