// multipart/form-data uploads, streamed: the request is scanned as it arrives (form-data.ts)
// and the `file` part is handed to the upload use-case as a stream of views of the request's
// own chunks, so a file of any size costs the API process only the chunks in flight and no
// copy in JavaScript. Fields must come before the file part to affect how it is added (`car`);
// all fields are applied to the file record.
import { Readable } from 'node:stream';
import type { Request } from 'express';
import mime from 'mime-types';
import { InvalidInput } from '../../usecases/errors.js';
import { boundaryOf, FormDataError, FormDataScanner, type PartHeader } from './form-data.js';

export interface MultipartUpload<T> {
  fields: Record<string, string>;
  file: { added: T; filename: string; mimeType: string };
}

const MAX_FIELDS = 20;
const MAX_FIELD_BYTES = 64 * 1024;
/** How much of the file the stream to the use-case buffers before the request is paused. */
const FILE_BUFFER_BYTES = 1024 * 1024;

const malformed = (message: string) => new InvalidInput(`malformed multipart request: ${message}`, 'INVALID_MULTIPART');

/**
 * Reads the request; `add` receives the file part's stream as it comes, with the fields seen
 * so far, a signal that aborts when the request fails, and the file's type (its part's
 * Content-Type, or else the one its filename implies).
 */
export function readMultipart<T>(
  req: Request,
  add: (source: Readable, fields: Record<string, string>, signal: AbortSignal, mimeType: string) => Promise<T>,
): Promise<MultipartUpload<T>> {
  return new Promise((resolve, reject) => {
    const boundary = boundaryOf(req.headers['content-type']);
    if (!boundary) return reject(malformed('Multipart: Boundary not found'));
    const fields: Record<string, string> = {};
    const abort = new AbortController();
    let adding: Promise<MultipartUpload<T>['file']> | undefined;
    let file: Readable | undefined;
    let field: { name: string; parts: Buffer[]; bytes: number } | undefined;
    let parts = 0;
    let failed = false;

    const fail = (err: Error) => {
      if (failed) return;
      failed = true;
      abort.abort(err);
      file?.destroy(err);
      req.off('data', onData);
      req.resume(); // drain what the client still sends, so it gets our answer
      reject(err);
    };

    const scanner = new FormDataScanner(boundary, {
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
        adding = add(file, { ...fields }, abort.signal, mimeType).then((added) => ({ added, filename, mimeType }));
        adding.catch(fail);
      },
      data(chunk: Buffer) {
        if (file) {
          if (!file.push(chunk)) req.pause();
        } else if (field) {
          field.bytes += chunk.length;
          if (field.bytes > MAX_FIELD_BYTES) throw new InvalidInput(`field ${field.name} is longer than ${MAX_FIELD_BYTES} bytes`);
          field.parts.push(chunk);
        }
      },
      end() {
        if (file) {
          file.push(null);
          file = undefined;
        } else if (field) {
          fields[field.name] = Buffer.concat(field.parts).toString('utf8');
          field = undefined;
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
        scanner.finish();
      } catch (err) {
        return fail(malformed((err as Error).message));
      }
      if (!adding) return fail(new InvalidInput('the request has no part named "file"', 'MISSING_FILE'));
      adding.then((added) => resolve({ fields, file: added }), fail);
    });
    req.on('aborted', () => fail(new InvalidInput('the upload was interrupted', 'INVALID_BODY')));
    req.on('error', (err) => fail(new InvalidInput(`the upload failed: ${err.message}`, 'INVALID_BODY')));
  });
}
