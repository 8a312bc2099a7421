// A streaming multipart/form-data scanner (RFC 7578 over RFC 2046), made for large file parts:
// a part's bytes are handed on as views of the chunks that came in (no copy), and delimiters
// are found with Buffer#indexOf, native code. busboy, used before, searched every byte in
// JavaScript (a Boyer-Moore-Horspool loop): with the copies around it, about 1 CPU second per
// GiB uploaded, on a two-core machine where Kubo hashes the same bytes (see scripts/bench).
//
// Only what form uploads use: parts with Content-Disposition `form-data` (others are skipped),
// `name`, `filename` (or RFC 5987 `filename*`), and Content-Type. Header bytes are read as
// UTF-8, as browsers send file names. Content-Transfer-Encoding is ignored (RFC 7578 4.7).

/** What a part's headers say. */
export interface PartHeader {
  name: string | undefined;
  /** The file name, without any directory part; undefined for a text field. */
  filename: string | undefined;
  /** `type/subtype` of its Content-Type, lowercased; `text/plain` when absent. */
  mimeType: string;
}

export interface PartSink {
  /**
   * A form-data part begins (parts that are not form-data are skipped, their bytes dropped).
   * Returning true hands the rest of the body to `data` as it comes, unscanned (see `feed`).
   */
  begin(part: PartHeader): boolean | void;
  /** Bytes of the current part: a view of the input, valid while the input chunk is. */
  data(chunk: Buffer): void;
  end(): void;
}

export class FormDataError extends Error {
  override name = 'FormDataError';
}

/** What came after the part that took the body unscanned, known once the body ended. */
export interface Trailer {
  /** Bytes from the delimiter that ended that part to the end of the body. */
  bytes: number;
  /** The form's parts after it (each a text field: `PartSink` was told of them). */
  parts: number;
}

const CRLF = Buffer.from('\r\n');
const MAX_HEADER_BYTES = 16 * 1024;
const EMPTY = Buffer.alloc(0);
/**
 * The most an unscanned body may send after its part: more than the fields a valid upload can
 * have after its file (their longest values, metadata's included, come to about 25 KiB). A
 * longer trailer is refused: here when it is in the bytes kept, by the reader otherwise (the
 * parts Kubo found outnumber the ones found here).
 */
export const TRAILER_BYTES = 256 * 1024;

/** The boundary of a multipart/form-data Content-Type, or undefined. */
export function boundaryOf(contentType: string | undefined): string | undefined {
  const match = /;\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^;\s"]{1,70}))/i.exec(contentType ?? '');
  return match?.[1] ?? match?.[2];
}

type State = 'body' | 'after' | 'headers' | 'raw' | 'done';

export class FormDataScanner {
  private readonly delimiter: Buffer;
  private state: State = 'body';
  /** Before the first delimiter: the preamble, whose bytes are dropped. */
  private preamble = true;
  /** A part that is not form-data: its bytes are dropped. */
  private skipping = false;
  /** The end of the last chunk that may begin a delimiter (at most its length - 1 bytes). */
  private carry: Buffer;
  /** Bytes after a delimiter ('after') or of a header block ('headers'), until complete. */
  private pending = EMPTY;
  /** Bytes fed so far, and where the last part's body began. */
  private fed = 0;
  private bodyAt = 0;
  /** 'raw': the body's last chunks, at least TRAILER_BYTES of them when there are as many. */
  private last: Buffer[] = [];
  private lastBytes = 0;
  /** Parts whose header block was read. */
  private parts = 0;

  constructor(
    private readonly boundary: string,
    private readonly sink: PartSink,
    /** Parts must be text fields (a trailer). */
    private readonly fieldsOnly = false,
  ) {
    this.delimiter = Buffer.from(`\r\n--${boundary}`);
    // As if a line break came first, so that a body opening with its first delimiter (no
    // preamble, the usual case) matches `\r\n--boundary` like every later one.
    this.carry = CRLF;
  }

  get complete(): boolean {
    return this.state === 'done';
  }

  /** Where in the body the last part's own bytes begin (after its header block). */
  get partBodyAt(): number {
    return this.bodyAt;
  }

  /**
   * Scans the next chunk of the body; throws FormDataError when it is malformed. Once `begin`
   * asked for the rest unscanned, every byte goes to `data` as it is, delimiters and the parts
   * after included: the reader hands them to something that parses them itself (Kubo), and
   * `finish` reads the trailer from the body's last bytes.
   */
  feed(chunk: Buffer): void {
    this.fed += chunk.length;
    let at = 0;
    while (at < chunk.length) {
      if (this.state === 'body') at = this.body(chunk, at);
      else if (this.state === 'after') at = this.afterDelimiter(chunk, at);
      else if (this.state === 'headers') at = this.headers(chunk, at);
      else if (this.state === 'raw') at = this.raw(chunk, at);
      else return; // the epilogue, ignored
    }
  }

  /**
   * The body ended; throws unless the closing delimiter came. After an unscanned rest, reads
   * the parts that followed the first delimiter in it (the reader learns of them as of any
   * part) and returns how long they were; each must be a text field.
   */
  finish(): Trailer | undefined {
    if (this.state === 'raw') return this.trailer();
    if (this.state !== 'done') throw new FormDataError('Unexpected end of form');
    return undefined;
  }

  private raw(chunk: Buffer, from: number): number {
    const bytes = from === 0 ? chunk : chunk.subarray(from);
    this.sink.data(bytes);
    this.last.push(bytes);
    this.lastBytes += bytes.length;
    while (this.lastBytes - this.last[0]!.length >= TRAILER_BYTES) this.lastBytes -= this.last.shift()!.length;
    return chunk.length;
  }

  private trailer(): Trailer {
    const end = Buffer.concat(this.last);
    const at = end.indexOf(this.delimiter);
    if (at < 0) throw new FormDataError('Unexpected end of form');
    if (end.length - at > TRAILER_BYTES) throw new FormDataError(`the parts after the file are too long (over ${TRAILER_BYTES} bytes)`);
    // The rest is scanned as a body of its own that opens with its first delimiter; the sink
    // hears of its fields. Any part but a text field would mean something else to Kubo.
    const rest = new FormDataScanner(this.boundary, this.sink, true);
    rest.feed(end.subarray(at));
    rest.finish();
    return { bytes: end.length - at, parts: rest.parts };
  }

  private emit(bytes: Buffer): void {
    if (bytes.length > 0 && !this.preamble && !this.skipping) this.sink.data(bytes);
  }

  private partEnded(): void {
    if (!this.preamble && !this.skipping) this.sink.end();
    this.preamble = false;
    this.state = 'after';
    this.pending = EMPTY;
  }

  /** Part bytes until a delimiter; returns where scanning goes on. */
  private body(chunk: Buffer, from: number): number {
    const d = this.delimiter;
    if (this.carry.length > 0) {
      // A delimiter may begin in the carried bytes: look at them with enough of this chunk.
      const carried = this.carry.length;
      const probe = Buffer.concat([this.carry, chunk.subarray(from, from + d.length - 1)]);
      const found = probe.indexOf(d);
      this.carry = EMPTY;
      if (found >= 0 && found < carried) {
        this.emit(probe.subarray(0, found));
        this.partEnded();
        return from + found + d.length - carried;
      }
      if (found < 0 && probe.length < carried + d.length - 1) {
        // This chunk is too short to tell: all of it joins the carry.
        const keep = partialDelimiter(probe, 0, d);
        this.emit(probe.subarray(0, probe.length - keep));
        this.carry = Buffer.from(probe.subarray(probe.length - keep));
        return chunk.length;
      }
      this.emit(probe.subarray(0, carried));
    }
    const found = chunk.indexOf(d, from);
    if (found >= 0) {
      this.emit(chunk.subarray(from, found));
      this.partEnded();
      return found + d.length;
    }
    const keep = partialDelimiter(chunk, from, d);
    this.emit(chunk.subarray(from, chunk.length - keep));
    // Copied: the carry outlives the chunk, which the sink may hold on to.
    if (keep > 0) this.carry = Buffer.from(chunk.subarray(chunk.length - keep));
    return chunk.length;
  }

  /** After a delimiter: `--` ends the form, optional blanks and CRLF begin a part's headers. */
  private afterDelimiter(chunk: Buffer, from: number): number {
    const seen = Buffer.concat([this.pending, chunk.subarray(from, from + 256)]);
    let i = 0;
    while (i < seen.length && (seen[i] === 0x20 || seen[i] === 0x09)) i++;
    if (seen.length - i < 2) {
      if (i > 200) throw new FormDataError('Malformed part boundary');
      this.pending = seen;
      return Math.min(chunk.length, from + 256);
    }
    const used = i + 2 - this.pending.length;
    if (seen[i] === 0x2d && seen[i + 1] === 0x2d) {
      this.state = 'done';
      return chunk.length;
    }
    if (seen[i] !== 0x0d || seen[i + 1] !== 0x0a) throw new FormDataError('Malformed part boundary');
    this.state = 'headers';
    // The line break that ended the delimiter's line starts the header block, so that a part
    // without headers ("\r\n" right away) ends its block like any other.
    this.pending = CRLF;
    return from + used;
  }

  /** A part's header block, up to the empty line. */
  private headers(chunk: Buffer, from: number): number {
    const before = this.pending.length;
    const seen = Buffer.concat([this.pending, chunk.subarray(from, from + MAX_HEADER_BYTES)]);
    const end = seen.indexOf('\r\n\r\n');
    if (end < 0) {
      if (seen.length > MAX_HEADER_BYTES) throw new FormDataError('Malformed part header: too long');
      this.pending = seen;
      return Math.min(chunk.length, from + MAX_HEADER_BYTES);
    }
    const part = parseHeaders(seen.subarray(2, end).toString('utf8'));
    this.parts++;
    if (this.fieldsOnly && (!part || part.filename !== undefined || part.mimeType !== 'text/plain')) {
      throw new FormDataError('a part after the file must be a text field');
    }
    this.pending = EMPTY;
    this.state = 'body';
    this.skipping = part === undefined;
    const next = from + end + 4 - before;
    this.bodyAt = this.fed - chunk.length + next;
    if (part && this.sink.begin(part) === true) this.state = 'raw';
    return next;
  }
}

/** The length of the longest end of `buf[from..]` that begins `delimiter` (shorter than it). */
function partialDelimiter(buf: Buffer, from: number, delimiter: Buffer): number {
  const longest = Math.min(delimiter.length - 1, buf.length - from);
  for (let k = longest; k > 0; k--) {
    const start = buf.length - k;
    if (buf[start] === delimiter[0] && buf.compare(delimiter, 0, k, start) === 0) return k;
  }
  return 0;
}

/** The part's form-data header, or undefined for a part that is not form-data. */
function parseHeaders(block: string): PartHeader | undefined {
  const headers = new Map<string, string>();
  let last: string | undefined;
  for (const line of block.split('\r\n')) {
    if (line === '') continue; // a part with no headers at all
    if (/^[ \t]/.test(line) && last) {
      headers.set(last, `${headers.get(last)} ${line.trim()}`); // a folded line continues the last
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) throw new FormDataError('Malformed part header');
    last = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(last)) headers.set(last, line.slice(colon + 1).trim());
  }
  const disposition = headers.get('content-disposition');
  if (!disposition) return undefined;
  const [type, params] = parameters(disposition);
  if (type !== 'form-data') return undefined;
  const named = params.get('filename*') ?? params.get('filename');
  const [mimeType] = parameters(headers.get('content-type') ?? 'text/plain');
  return {
    name: params.get('name'),
    filename: named === undefined ? undefined : named.slice(Math.max(named.lastIndexOf('/'), named.lastIndexOf('\\')) + 1),
    mimeType: mimeType || 'text/plain',
  };
}

/** `value; key=token; key="quoted \" string"; key*=utf-8''percent%20encoded` */
function parameters(header: string): [string, Map<string, string>] {
  const semi = header.indexOf(';');
  const value = (semi < 0 ? header : header.slice(0, semi)).trim().toLowerCase();
  const params = new Map<string, string>();
  const pattern = /;\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;
  for (let m = pattern.exec(header); m; m = pattern.exec(header)) {
    const key = m[1]!.toLowerCase();
    // In a quoted value `\"` and `\\` are escapes; any other backslash is itself (old browsers
    // sent Windows paths, C:\dir\name, unescaped).
    let text = m[2] !== undefined ? m[2].replace(/\\(["\\])/g, '$1') : m[3]!.trim();
    if (key.endsWith('*')) {
      const extended = /^([^']*)'[^']*'(.*)$/.exec(text);
      if (!extended) continue;
      try {
        text = /^utf-?8$/i.test(extended[1]!)
          ? decodeURIComponent(extended[2]!)
          : extended[2]!.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
      } catch {
        continue;
      }
    }
    if (!params.has(key)) params.set(key, text);
  }
  return [value, params];
}
