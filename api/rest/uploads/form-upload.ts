// multipart/form-data uploads, streamed: the request is scanned as it arrives (form-data.ts)
// and the `file` part is handed to the upload use-case as a stream of views of the request's
// own chunks, so a file of any size costs the API process only the chunks in flight and no
// copy in JavaScript. Fields must come before the file part to affect how it is added (`car`);
// all fields are applied to the file record.
//
// When the caller lets it (`unscanned`), the scan stops where the file's bytes begin: the rest of
// the body goes on as it came, in the client's framing, and Kubo, which parses the form anyway,
// finds the file's end (the use-case names the boundary to it, `Framing`). Scanning a GiB for
// the delimiter was most of what the API spent on an upload beyond piping it (docs/measurements.md).
// The parts after the file are read from the body's last bytes once it ended.
import { Readable } from 'node:stream';
import type { Request } from 'express';
import mime from 'mime-types';
import { InvalidInput } from '../../../core/errors.js';
import type { Framing } from '../../../core/uploads.js';
import { boundaryOf, FormDataError, FormDataScanner, TRAILER_BYTES, type PartHeader, type Trailer } from './form-data.js';

export interface MultipartUpload<T> {
  fields: Record<string, string>;
  file: { added: T; filename: string; mimeType: string };
}

const MAX_FIELDS = 20;
const MAX_FIELD_BYTES = 64 * 1024;
/** How much of the file the stream to the use-case buffers before the request is paused. */
const FILE_BUFFER_BYTES = 1024 * 1024;

const malformed = (message: string) => new InvalidInput(`malformed multipart request: ${message}`, 'INVALID_MULTIPART');

export interface FilePart {
  /** The file's bytes; with `framing`, the body from them to its end, in the form's framing. */
  source: Readable;
  /** The fields seen before the file. */
  fields: Record<string, string>;
  /** Aborts when the request fails. */
  signal: AbortSignal;
  /** Its part's Content-Type, or else the one its filename implies. */
  mimeType: string;
  framing?: Framing;
}

/**
 * Reads the request; `add` receives the file part as it comes. `unscanned(fields)` says
 * whether the file may come in its framing (given the fields before it).
 */
export function readMultipart<T>(
  req: Request,
  add: (part: FilePart) => Promise<T>,
  unscanned: (fields: Record<string, string>) => boolean = () => false,
): Promise<MultipartUpload<T>> {
  return new Promise((resolve, reject) => {
    const boundary = boundaryOf(req.headers['content-type']);
    if (!boundary) return reject(malformed('Multipart: Boundary not found'));
    const bodyLength = req.headers['transfer-encoding'] ? undefined : Number(req.headers['content-length'] ?? NaN);
    const fields: Record<string, string> = {};
    const abort = new AbortController();
    let adding: Promise<MultipartUpload<T>['file']> | undefined;
    let file: Readable | undefined;
    let field: { name: string; parts: Buffer[]; bytes: number } | undefined;
    let parts = 0;
    let failed = false;
    /** The file's stream takes the rest of the body unscanned (and is ended only with it). */
    let framed = false;
    let trailer: Trailer | undefined;

    const fail = (err: Error) => {
      if (failed) return;
      failed = true;
      abort.abort(err);
      file?.destroy(err);
      req.off('data', onData);
      req.resume(); // drain what the client still sends, so it gets our answer
      reject(err);
    };

    const scanner: FormDataScanner = new FormDataScanner(boundary, {
      begin(part: PartHeader) {
        if (++parts > MAX_FIELDS + 1) throw new InvalidInput(`at most ${MAX_FIELDS} fields and one file`, 'INVALID_MULTIPART');
        const isFile = part.filename !== undefined || part.mimeType === 'application/octet-stream';
        if (!isFile) {
          // A part without a filename (and not application/octet-stream) is a text field.
          if (part.name === 'file') {
            throw new InvalidInput('the part "file" must be a file: give it a filename in its Content-Disposition', 'MISSING_FILE');
          }
          if (Object.keys(fields).length >= MAX_FIELDS) throw new InvalidInput(`at most ${MAX_FIELDS} fields`, 'INVALID_MULTIPART');
          field = { name: part.name ?? '', parts: [], bytes: 0 };
          return;
        }
        if (adding) throw new InvalidInput('one file part is allowed', 'INVALID_MULTIPART');
        if (part.name !== 'file') throw new InvalidInput(`one file part named "file" is expected, got "${part.name}"`, 'INVALID_MULTIPART');
        const declared = part.mimeType !== 'application/octet-stream' ? part.mimeType : undefined;
        const filename = part.filename ?? 'file';
        const mimeType = declared ?? (mime.lookup(filename) || 'application/octet-stream');
        // The request resumes when the use-case reads again: backpressure from Kubo to the client.
        file = new Readable({ highWaterMark: FILE_BUFFER_BYTES, read: () => void req.resume() });
        let framing: Framing | undefined;
        if (unscanned(fields)) {
          framed = true;
          const length = bodyLength !== undefined && Number.isSafeInteger(bodyLength) ? bodyLength - scanner.partBodyAt : undefined;
          framing = {
            boundary,
            length,
            trailerAtMost: TRAILER_BYTES,
            trailer: () => {
              if (!trailer) throw new Error('the trailer is read once the body ended');
              return trailer;
            },
          };
        }
        adding = add({ source: file, fields: { ...fields }, signal: abort.signal, mimeType, framing }).then((added) => ({
          added,
          filename,
          mimeType,
        }));
        adding.catch(fail);
        return framed;
      },
      data(chunk: Buffer) {
        // A field first: the fields after an unscanned file come while its stream is open.
        if (field) {
          field.bytes += chunk.length;
          if (field.bytes > MAX_FIELD_BYTES) throw new InvalidInput(`field ${field.name} is longer than ${MAX_FIELD_BYTES} bytes`);
          field.parts.push(chunk);
        } else if (file) {
          if (!file.push(chunk)) req.pause();
        }
      },
      end() {
        if (field) {
          fields[field.name] = Buffer.concat(field.parts).toString('utf8');
          field = undefined;
        } else if (file) {
          file.push(null);
          file = undefined;
        }
      },
    });

    function onData(chunk: Buffer) {
      try {
        scanner.feed(chunk);
      } catch (err) {
        fail(err instanceof FormDataError ? malformed(err.message) : (err as Error));
      }
    }
    req.on('data', onData);
    req.on('end', () => {
      if (failed) return;
      try {
        trailer = scanner.finish();
      } catch (err) {
        return fail(err instanceof FormDataError ? malformed(err.message) : (err as Error));
      }
      // Only now, with the fields after it read and sound, does the file's stream (and so
      // Kubo's request) end.
      if (framed) file?.push(null);
      if (!adding) return fail(new InvalidInput('the request has no part named "file"', 'MISSING_FILE'));
      adding.then((added) => resolve({ fields, file: added }), fail);
    });
    req.on('aborted', () => fail(new InvalidInput('the upload was interrupted', 'INVALID_BODY')));
    req.on('error', (err) => fail(new InvalidInput(`the upload failed: ${err.message}`, 'INVALID_BODY')));
  });
}
