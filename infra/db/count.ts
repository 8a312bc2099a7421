import type { Model } from 'mongoose';

/**
 * The number of documents matching a filter, by the `count` command rather than mongoose's
 * countDocuments (an aggregation): on a MongoDB both read the index; on the stack's FerretDB
 * `count` of a filter it can push down whole is SQLite's count(*) over the index
 * (stack/patches/ferretdb/0002-pushdown.patch), while the aggregation decodes every
 * matching document (measured: 363 ms for 4,000 documents).
 */
export async function count<T>(model: Model<T>, filter: Record<string, unknown>): Promise<number> {
  const res = (await model.db.db!.command({ count: model.collection.collectionName, query: filter })) as { n: number };
  return res.n;
}
