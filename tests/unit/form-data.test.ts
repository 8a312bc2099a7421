// The multipart/form-data scanner of uploads (api/rest/uploads/form-data.ts), on its own: bodies
// built from known parts must give those parts back exactly however the body is cut into
// chunks, including file bytes full of near-delimiters.
import crypto from 'node:crypto';
import { boundaryOf, FormDataScanner, TRAILER_BYTES, type PartHeader } from '../../api/rest/uploads/form-data.js';

interface Part {
  headers: string[];
  body: Buffer;
}

function build(boundary: string, parts: Part[], preamble = '', epilogue = ''): Buffer {
  const pieces: Buffer[] = [Buffer.from(preamble ? `${preamble}\r\n` : '')];
  for (const p of parts)
    pieces.push(Buffer.from(`--${boundary}\r\n${p.headers.map((h) => `${h}\r\n`).join('')}\r\n`), p.body, Buffer.from('\r\n'));
  pieces.push(Buffer.from(`--${boundary}--${epilogue}`));
  return Buffer.concat(pieces);
}

/** Scans `body` cut at `cuts`; returns each part's header and bytes. */
function scan(boundary: string, body: Buffer, cuts: number[]): { header: PartHeader; body: Buffer }[] {
  const found: { header: PartHeader; chunks: Buffer[] }[] = [];
  const scanner = new FormDataScanner(boundary, {
    begin: (header) => void found.push({ header, chunks: [] }),
    data: (chunk) => void found[found.length - 1]!.chunks.push(Buffer.from(chunk)),
    end: () => undefined,
  });
  let at = 0;
  for (const cut of [...cuts, body.length]) {
    scanner.feed(body.subarray(at, cut));
    at = cut;
  }
  scanner.finish();
  return found.map((f) => ({ header: f.header, body: Buffer.concat(f.chunks) }));
}

const boundary = '----stupaTestBoundary7MA4YWxkTrZu0gW';
const tricky = Buffer.concat([
  Buffer.from(`\r\n--${boundary.slice(0, 10)}`),
  Buffer.from('\r\n--'),
  crypto.randomBytes(300),
  Buffer.from(`\r\n-${boundary}`),
  Buffer.from('\r\r\n\r\n--'),
  Buffer.from(`--${boundary}`), // the boundary not preceded by CRLF is data
]);
const parts: Part[] = [
  { headers: ['Content-Disposition: form-data; name="name"'], body: Buffer.from('a name') },
  { headers: ['Content-Disposition: form-data; name="empty"'], body: Buffer.alloc(0) },
  {
    headers: ['Content-Disposition: form-data; name="file"; filename="C:\\dir\\photo.jpg"', 'Content-Type: Image/JPEG; charset=x'],
    body: tricky,
  },
];
const expected = [
  { header: { name: 'name', filename: undefined, mimeType: 'text/plain' }, body: Buffer.from('a name') },
  { header: { name: 'empty', filename: undefined, mimeType: 'text/plain' }, body: Buffer.alloc(0) },
  { header: { name: 'file', filename: 'photo.jpg', mimeType: 'image/jpeg' }, body: tricky },
];

test('every single cut of a body gives the same parts', () => {
  const body = build(boundary, parts);
  for (let cut = 0; cut <= body.length; cut++) expect(scan(boundary, body, [cut])).toEqual(expected);
});

test('byte by byte, and random cuts, with a preamble and an epilogue', () => {
  const body = build(boundary, parts, 'a preamble\r\n--not it', '\r\nan epilogue');
  expect(
    scan(
      boundary,
      body,
      Array.from({ length: body.length }, (_, i) => i),
    ),
  ).toEqual(expected);
  for (let round = 0; round < 200; round++) {
    const cuts = Array.from({ length: 1 + (round % 7) }, () => Math.floor(Math.random() * body.length)).sort((a, b) => a - b);
    expect(scan(boundary, body, cuts)).toEqual(expected);
  }
});

test('a large file part comes back whole in views of large chunks', () => {
  const file = Buffer.concat(
    Array.from({ length: 64 }, () => Buffer.concat([crypto.randomBytes(16_000), Buffer.from(`\r\n--${boundary.slice(0, 20)}`)])),
  );
  const body = build(boundary, [{ headers: ['Content-Disposition: form-data; name="file"; filename="big.bin"'], body: file }]);
  const cuts = Array.from({ length: Math.floor(body.length / 65_536) }, (_, i) => (i + 1) * 65_536);
  const [part] = scan(boundary, body, cuts);
  expect(part!.body.equals(file)).toBe(true);
});

test('file names: UTF-8 as browsers send them, RFC 5987 filename*, quoted escapes', () => {
  const named = (disposition: string) =>
    scan(boundary, build(boundary, [{ headers: [`Content-Disposition: ${disposition}`], body: Buffer.from('x') }]), [])[0]!.header.filename;
  expect(named('form-data; name="file"; filename="héllo wörld.txt"')).toBe('héllo wörld.txt');
  expect(named(`form-data; name="file"; filename="plain.txt"; filename*=UTF-8''%E2%82%AC%20rates.txt`)).toBe('€ rates.txt');
  expect(named('form-data; name="file"; filename="say \\"hi\\".txt"')).toBe('say "hi".txt');
  expect(named('form-data; name=file; filename=bare.txt')).toBe('bare.txt');
  expect(named('form-data; name="file"; filename="../../etc/passwd"')).toBe('passwd');
});

test('parts that are not form-data are skipped; malformed bodies are refused', () => {
  const body = build(boundary, [
    { headers: ['Content-Type: text/plain'], body: Buffer.from('no disposition') },
    { headers: [], body: Buffer.from('no headers at all') },
    { headers: ['Content-Disposition: attachment; filename="x"'], body: Buffer.from('not form-data') },
    { headers: ['Content-Disposition: form-data; name="kept"'], body: Buffer.from('kept') },
  ]);
  expect(scan(boundary, body, [7, 50])).toEqual([
    { header: { name: 'kept', filename: undefined, mimeType: 'text/plain' }, body: Buffer.from('kept') },
  ]);

  const truncated = build(boundary, parts).subarray(0, 200);
  expect(() => scan(boundary, truncated, [])).toThrow(/Unexpected end of form/);
  expect(() => scan(boundary, Buffer.from(`--${boundary}\r\nno colon here\r\n\r\nx\r\n--${boundary}--`), [])).toThrow(
    /Malformed part header/,
  );
  expect(() => scan(boundary, Buffer.from(`--${boundary}xx`), [])).toThrow(/Malformed part boundary/);
});

/**
 * Scans `body` cut at `cuts`, taking the part named "file" unscanned: returns the raw bytes
 * from its first byte on, the fields, where its bytes began, and the trailer.
 */
function scanRaw(body: Buffer, cuts: number[]) {
  const fields: Record<string, string> = {};
  const raw: Buffer[] = [];
  let field: string | undefined;
  let inFile = false;
  const scanner = new FormDataScanner(boundary, {
    begin: (header) => {
      if (header.name === 'file') return (inFile = true);
      field = header.name!;
      fields[field] = '';
      return false;
    },
    data: (chunk) => {
      if (field !== undefined) fields[field] += chunk.toString();
      else if (inFile) raw.push(Buffer.from(chunk));
    },
    end: () => void (field = undefined),
  });
  let at = 0;
  for (const cut of [...cuts, body.length]) {
    scanner.feed(body.subarray(at, cut));
    at = cut;
  }
  const trailer = scanner.finish();
  return { fields, raw: Buffer.concat(raw), bodyAt: scanner.partBodyAt, trailer };
}

describe('a part taken unscanned', () => {
  const fileHeaders = ['Content-Disposition: form-data; name="file"; filename="f.bin"'];
  const field = (name: string, value: string) => ({
    headers: [`Content-Disposition: form-data; name="${name}"`],
    body: Buffer.from(value),
  });

  test('gets the rest of the body as it is; the fields after it come from its end, for every cut', () => {
    const body = build(
      boundary,
      [field('before', 'b'), { headers: fileHeaders, body: tricky }, field('name', 'n'), field('empty', '')],
      '',
      '\r\nepilogue',
    );
    const fileAt = body.indexOf(tricky);
    for (let cut = 0; cut <= body.length; cut += 7) {
      const got = scanRaw(body, [cut]);
      expect(got.raw.equals(body.subarray(fileAt))).toBe(true);
      expect(got.bodyAt).toBe(fileAt);
      expect(got.fields).toEqual({ before: 'b', name: 'n', empty: '' });
      // What follows the file: its delimiter to the end of the body, in two parts.
      expect(got.trailer).toEqual({ bytes: body.length - fileAt - tricky.length, parts: 2 });
    }
  });

  test('a large file: only the end is read for the trailer', () => {
    const file = crypto.randomBytes(5 * 1024 * 1024);
    const body = build(boundary, [{ headers: fileHeaders, body: file }, field('name', 'n')]);
    const cuts = Array.from({ length: Math.floor(body.length / 65_536) }, (_, i) => (i + 1) * 65_536);
    const got = scanRaw(body, cuts);
    expect(got.raw.length).toBe(body.length - got.bodyAt);
    expect(got.trailer).toEqual({ bytes: body.length - got.bodyAt - file.length, parts: 1 });
    expect(got.fields).toEqual({ name: 'n' });
  });

  test('no closing delimiter, or a part after it that is not a text field, is refused', () => {
    const body = build(boundary, [{ headers: fileHeaders, body: Buffer.from('data') }, field('name', 'n')]);
    expect(() => scanRaw(body.subarray(0, body.length - 4), [])).toThrow(/Unexpected end of form/);
    expect(() => scanRaw(body.subarray(0, body.indexOf('data') + 4), [])).toThrow(/Unexpected end of form/);
    const long = build(boundary, [{ headers: fileHeaders, body: Buffer.from('data') }, field('name', 'n'.repeat(TRAILER_BYTES))]);
    expect(() => scanRaw(long, [])).toThrow(/the parts after the file are too long/);
    for (const headers of [
      ['Content-Disposition: form-data; name="again"; filename="2.bin"'],
      ['Content-Disposition: form-data; name="dir"', 'Content-Type: application/x-directory'],
      ['Content-Type: text/plain'],
    ]) {
      const after = build(boundary, [
        { headers: fileHeaders, body: Buffer.from('data') },
        { headers, body: Buffer.from('x') },
      ]);
      expect(() => scanRaw(after, [])).toThrow(/a part after the file must be a text field/);
    }
  });
});

test('the boundary of a Content-Type, quoted or not', () => {
  expect(boundaryOf('multipart/form-data; boundary=abc')).toBe('abc');
  expect(boundaryOf('multipart/form-data; charset=utf-8; boundary="a b:c"')).toBe('a b:c');
  expect(boundaryOf('multipart/form-data')).toBeUndefined();
  expect(boundaryOf(undefined)).toBeUndefined();
});
