// The JSON form of an upload: `content` is a JSON value (stored as its JSON text), a text
// string, a `data:` URL, or base64 with `encoding: "base64"` (docs/api/contract.md, "Uploads").
import { InvalidInput } from '../../../core/errors.js';

export interface Decoded {
  bytes: Uint8Array;
  mimeType: string;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]*$/;

function fromBase64(text: string, where: string): Uint8Array {
  const compact = text.replace(/\s+/g, '');
  if (!(BASE64.test(compact) || BASE64URL.test(compact))) throw new InvalidInput(`${where} is not valid base64`, 'INVALID_CONTENT');
  return Buffer.from(compact, BASE64.test(compact) ? 'base64' : 'base64url');
}

/** `data:[<media type>][;base64],<data>` (RFC 2397). */
function fromDataUrl(url: string): Decoded {
  const comma = url.indexOf(',');
  if (comma < 0) throw new InvalidInput('content is a data: URL without a comma', 'INVALID_CONTENT');
  const header = url.slice(5, comma).split(';');
  const isBase64 = header[header.length - 1]?.toLowerCase() === 'base64';
  const mimeType = (header[0] || 'text/plain').toLowerCase();
  const data = url.slice(comma + 1);
  let bytes: Uint8Array;
  if (isBase64) bytes = fromBase64(data, 'the data: URL');
  else {
    try {
      bytes = Buffer.from(decodeURIComponent(data), 'utf8');
    } catch {
      throw new InvalidInput('the data: URL is not properly percent-encoded', 'INVALID_CONTENT');
    }
  }
  return { bytes, mimeType };
}

export function decodeContent(content: unknown, encoding: 'base64' | undefined): Decoded {
  if (typeof content === 'string') {
    if (encoding === 'base64') return { bytes: fromBase64(content, 'content'), mimeType: 'application/octet-stream' };
    if (content.startsWith('data:')) return fromDataUrl(content);
    return { bytes: Buffer.from(content, 'utf8'), mimeType: 'text/plain' };
  }
  if (encoding === 'base64') throw new InvalidInput('encoding "base64" needs content to be a string', 'INVALID_CONTENT');
  return { bytes: Buffer.from(JSON.stringify(content), 'utf8'), mimeType: 'application/json' };
}
