// S3's XML documents, both ways, on fast-xml-parser.
//
//   toXml(root, body: object, { namespace? }): string
//     `<?xml …?><Root xmlns="http://s3.amazonaws.com/doc/2006-03-01/">…</Root>`. Arrays repeat
//     their element (`{Contents: [a, b]}` is two <Contents>), null and undefined are left out,
//     Dates are ISO 8601 with milliseconds (S3's LastModified), booleans `true`/`false`. Keys
//     starting with `@_` are attributes (ACL grantees' `xsi:type`). The root carries S3's
//     namespace, as S3's answers do, except `<Error>`, which has none.
//   parseXml(text, arrayPaths, maxBytes?): Record<string, unknown>
//     The whole document, root element included (`{Delete: {Object: [...], Quiet: 'true'}}`).
//     Every value is a string (an ETag or a key like `0001` must not become a number), empty
//     elements are '', namespaces and attributes are dropped, values are not trimmed (keys may
//     begin or end with spaces). The elements named by `arrayPaths` (dotted from the root,
//     `CompleteMultipartUpload.Part`) are always arrays, even with one element.
//     Not well-formed, or with a DTD: MalformedXML. Over maxBytes (1 MiB): EntityTooLarge.
//   errorXml(err, resource, requestId): string
//     `<Error><Code/><Message/>…<Resource/><RequestId/></Error>` of any error (asS3Error).
import { XMLBuilder, XMLParser, XMLValidator } from 'fast-xml-parser';
import { asS3Error, S3Error } from './errors.js';

export const S3_NAMESPACE = 'http://s3.amazonaws.com/doc/2006-03-01/';
const DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';
const DEFAULT_MAX_BYTES = 1024 * 1024;

export type XmlValue = string | number | boolean | bigint | Date | null | undefined | XmlObject | XmlValue[];
export interface XmlObject {
  [name: string]: XmlValue;
}

// The builder's own escaping is off: plain() escapes every value, including a carriage
// return (as `&#13;`), which an XML parser would otherwise read back as a newline.
const builder = new XMLBuilder({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  format: false,
  suppressEmptyNode: false,
  processEntities: false,
});
const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/** XML text: the five specials as entities, control characters (but tab and newline) as character references. */
function escape(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[&<>"'\u0000-\u0008\u000b-\u001f]/g, (c) => ESCAPES[c] ?? `&#${c.charCodeAt(0)};`);
}

/** Plain strings and nested objects only, so the builder has nothing to interpret. */
function plain(value: XmlValue): unknown {
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.filter((item) => item !== null && item !== undefined).map(plain);
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [name, item] of Object.entries(value)) if (item !== null && item !== undefined) out[name] = plain(item);
    return out;
  }
  return escape(String(value));
}

export function toXml(root: string, body: object, { namespace = root !== 'Error' }: { namespace?: boolean } = {}): string {
  const content = plain(body as XmlObject) as Record<string, unknown>;
  const element = namespace ? { '@_xmlns': S3_NAMESPACE, ...content } : content;
  return DECLARATION + builder.build({ [root]: element });
}

const ENTITY = /&(?:(lt|gt|amp|quot|apos)|#([0-9]{1,7})|#x([0-9a-fA-F]{1,6}));/g;
const NAMED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/**
 * XML's own five entities and character references, in one pass (so `&amp;lt;` stays `&lt;`).
 * The parser's entity handling is off: it would also expand entities a DTD declares, and it
 * leaves character references alone (the JS SDK sends a newline in a key as `&#x0A;`).
 */
function decodeEntities(text: string): string {
  if (!text.includes('&')) return text;
  return text.replace(ENTITY, (whole, name?: string, dec?: string, hex?: string) => {
    if (name) return NAMED[name]!;
    const code = dec !== undefined ? Number(dec) : parseInt(hex!, 16);
    return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : whole;
  });
}

/** Drops the whitespace between elements, which untrimmed parsing keeps as `#text`. */
function clean(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(clean);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [name, item] of Object.entries(value)) {
    if (name === '#text' && typeof item === 'string' && item.trim() === '') continue;
    out[name] = clean(item);
  }
  return out;
}

export function parseXml(text: string | Buffer, arrayPaths: readonly string[] = [], maxBytes = DEFAULT_MAX_BYTES): Record<string, unknown> {
  const size = typeof text === 'string' ? Buffer.byteLength(text) : text.length;
  if (size > maxBytes) throw new S3Error('EntityTooLarge', `The XML document is larger than ${maxBytes} bytes.`);
  const source = typeof text === 'string' ? text : text.toString('utf8');
  if (/<!DOCTYPE|<!ENTITY/i.test(source)) throw new S3Error('MalformedXML', 'The XML you provided declares a DTD, which is not accepted.');
  if (XMLValidator.validate(source) !== true) throw new S3Error('MalformedXML');
  const arrays = new Set(arrayPaths);
  const parser = new XMLParser({
    ignoreAttributes: true,
    ignoreDeclaration: true,
    ignorePiTags: true,
    removeNSPrefix: true,
    parseTagValue: false,
    trimValues: false,
    processEntities: false,
    tagValueProcessor: (_name, value) => decodeEntities(value),
    isArray: (_name, path) => arrays.has(String(path)),
  });
  let document: unknown;
  try {
    document = clean(parser.parse(source));
  } catch {
    throw new S3Error('MalformedXML');
  }
  if (typeof document !== 'object' || document === null || Object.keys(document).length !== 1) throw new S3Error('MalformedXML');
  return document as Record<string, unknown>;
}

/** S3's error document. `resource` is the request's path (bucket and key as the client sent them). */
export function errorXml(err: unknown, resource: string, requestId: string): string {
  const error = asS3Error(err);
  return toXml('Error', { Code: error.code, Message: error.message, ...error.fields, Resource: resource, RequestId: requestId });
}
