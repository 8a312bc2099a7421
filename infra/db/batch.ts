// Group commit: the writes (and reads) that many small requests repeat, sent as one command for
// all the requests that arrive together. A batch opens with its first entry and is written on
// the next turn of the event loop, or when the batcher's previous write ends if one is under way;
// entries that come meanwhile join it. So alone a request waits one turn, and under load the
// commands per request fall with the load: each write carries what arrived during the last one.
//
// Each entry settles with the write that carried it, so a caller that was answered knows its
// entry is stored, exactly as with one command each. The write gives each entry its own result
// or Error (an insert of many documents can fail for one of them); if it throws, every entry
// of the batch fails with that error.
//
// Why not a library: the batching libraries on npm (dataloader and its kind) batch by turn
// alone and do not wait for the write under way, which is what makes batches grow with load;
// this is twenty lines.
//
// A write must never wait for an entry of its own batcher: that entry would be in the next
// batch, which waits for this write.

import mongoose, { type Model } from 'mongoose';
import { isDuplicateKey } from './errors.js';

export type Outcome<R> = R | Error;

/** Entries per command at most: a bound on its size (and on SQLite's parameters, 32,766, for
 * the `$in` of a batched read on the stack's FerretDB). */
export const MAX_BATCH = 1_000;

export function groupCommit<T, R = void>(write: (entries: T[]) => Promise<Outcome<R>[]>): (entry: T) => Promise<R> {
  let open: { entries: T[]; results: Promise<Outcome<R>[]> } | undefined;
  let writing: Promise<unknown> = Promise.resolve();
  return (entry) => {
    if (!open) {
      const batch: { entries: T[]; results?: Promise<Outcome<R>[]> } = { entries: [] };
      batch.results = writing
        .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
        .then(() => {
          // Later entries start a new batch from here on; this one is written as it is.
          if (open === batch) open = undefined;
          return write(batch.entries);
        });
      // The next batch waits for this write to end, whichever way it ends.
      writing = batch.results.catch(() => undefined);
      open = batch as { entries: T[]; results: Promise<Outcome<R>[]> };
    }
    const current = open;
    const index = current.entries.push(entry) - 1;
    // A full batch takes no more: the next entry opens one that waits for it.
    if (current.entries.length >= MAX_BATCH) open = undefined;
    return current.results.then((results) => {
      const result = results[index];
      if (result instanceof Error) throw result;
      return result as R;
    });
  };
}

/**
 * Reads by key, batched: the keys asked for while a read is under way are read together next,
 * with one query (`readMany`, answering the keys it found). Each caller's read starts after it
 * asked, so nothing is cached. Results are shared between callers: not to be modified.
 */
export function batchedReads<T>(readMany: (keys: string[]) => Promise<Map<string, T>>): (key: string) => Promise<T | null> {
  return groupCommit(async (keys: string[]) => {
    const found = await readMany([...new Set(keys)]);
    return keys.map((k) => found.get(k) ?? null);
  });
}

/** Documents of `model` by `_id`, batched (batchedReads): one `{_id: {$in}}` query per batch. */
export function batchedById<T extends { _id: string }>(model: Model<T>): (id: string) => Promise<T | null> {
  return batchedReads(async (ids) => {
    const found = await model
      .find({ _id: { $in: ids } })
      .lean<T[]>()
      .exec();
    return new Map(found.map((doc) => [doc._id, doc]));
  });
}

/**
 * Inserts documents with one unordered insert: each is `inserted`, a `duplicate` of an existing
 * `_id` or unique key, or its own Error. Throws when the insert failed as a whole (the server
 * unreachable, or its connection closed under the command: then any of the documents may have
 * been inserted, or none). The driver's own insert, not mongoose's: the documents are written
 * as given (no casting, which costs every document of every batch its schema walk).
 */
export async function insertUnordered<T>(model: Model<T>, docs: object[]): Promise<Outcome<'inserted' | 'duplicate'>[]> {
  if (docs.length === 0) return [];
  try {
    await model.collection.insertMany(docs as never[], { ordered: false });
    return docs.map(() => 'inserted');
  } catch (err) {
    // A bulk error with no write errors is the driver's own failure (the connection closed under
    // the command) wrapped: the server may have inserted any of the documents, or none.
    const writeErrors = err instanceof mongoose.mongo.MongoBulkWriteError ? [err.writeErrors ?? []].flat() : [];
    if (writeErrors.length === 0) throw err;
    const failed = new Map(writeErrors.map((e) => [e.index, e]));
    return docs.map((_, i) => {
      const e = failed.get(i);
      if (!e) return 'inserted';
      return isDuplicateKey({ code: e.code, message: e.errmsg }) ? 'duplicate' : new Error(e.errmsg ?? 'insert failed');
    });
  }
}
