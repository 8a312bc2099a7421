// multipart/form-data uploads, streamed: busboy parses the request as it arrives and the
// `file` part is handed to the upload use-case as a stream, so a file of any size costs the
// API process only the chunks in flight. Fields must come before the file part to affect how
// it is added (`car`); all fields are applied to the file record.
import type { Readable } from 'node:stream';
import type { Request } from 'express';
import busboy from 'busboy';
import mime from 'mime-types';
import { InvalidInput } from '../../usecases/errors.js';

export interface MultipartUpload<T> {
  fields: Record<string, string>;
  file: { added: T; filename: string; mimeType: string };
}

const MAX_FIELDS = 20;
const MAX_FIELD_BYTES = 64 * 1024;

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
    const fields: Record<string, string> = {};
    const abort = new AbortController();
    let adding: Promise<MultipartUpload<T>['file']> | undefined;
    let failed = false;
    const fail = (err: Error) => {
      if (failed) return;
      failed = true;
      abort.abort(err);
      req.unpipe(parser);
      req.resume(); // drain what the client still sends, so it gets our answer
      reject(err);
    };

    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        limits: { fields: MAX_FIELDS, fieldSize: MAX_FIELD_BYTES, files: 1, parts: MAX_FIELDS + 1 },
      });
    } catch (err) {
      reject(new InvalidInput(`malformed multipart request: ${(err as Error).message}`, 'INVALID_MULTIPART'));
      return;
    }

    parser.on('field', (name, value, info) => {
      // A part without a filename (and not application/octet-stream) is a text field to busboy.
      if (name === 'file') {
        return fail(new InvalidInput('the part "file" must be a file: give it a filename in its Content-Disposition', 'MISSING_FILE'));
      }
      if (info.valueTruncated) return fail(new InvalidInput(`field ${name} is longer than ${MAX_FIELD_BYTES} bytes`));
      fields[name] = value;
    });
    parser.on('file', (name, stream, info) => {
      if (name !== 'file' || adding) {
        stream.resume();
        return fail(new InvalidInput(`one file part named "file" is expected, got "${name}"`, 'INVALID_MULTIPART'));
      }
      const declared = info.mimeType && info.mimeType !== 'application/octet-stream' ? info.mimeType : undefined;
      const filename = info.filename ?? 'file';
      const mimeType = declared ?? (mime.lookup(filename) || 'application/octet-stream');
      adding = add(stream, { ...fields }, abort.signal, mimeType).then((added) => ({ added, filename, mimeType }));
      adding.catch(fail);
    });
    parser.on('partsLimit', () => fail(new InvalidInput(`at most ${MAX_FIELDS} fields and one file`, 'INVALID_MULTIPART')));
    parser.on('fieldsLimit', () => fail(new InvalidInput(`at most ${MAX_FIELDS} fields`, 'INVALID_MULTIPART')));
    parser.on('filesLimit', () => fail(new InvalidInput('one file part is allowed', 'INVALID_MULTIPART')));
    parser.on('error', (err: Error) => fail(new InvalidInput(`malformed multipart request: ${err.message}`, 'INVALID_MULTIPART')));
    parser.on('close', () => {
      if (failed) return;
      if (!adding) return fail(new InvalidInput('the request has no part named "file"', 'MISSING_FILE'));
      adding.then((file) => resolve({ fields, file }), fail);
    });
    req.on('aborted', () => fail(new InvalidInput('the upload was interrupted', 'INVALID_BODY')));
    req.pipe(parser);
  });
}
