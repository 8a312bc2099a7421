// List pages: every list is newest first and continues from an opaque cursor, the position
// (a time and an `_id`) of the previous page's last item (docs/api/contract.md, "Lists").
import { InvalidInput } from './errors.js';

export interface Position {
  at: number;
  id: string;
}

export const encodeCursor = ({ at, id }: Position) => Buffer.from(JSON.stringify([at, id])).toString('base64url');

export function decodeCursor(cursor: string): Position {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof at === 'number' && typeof id === 'string') return { at, id };
  } catch {
    // fall through
  }
  throw new InvalidInput('cursor is not one this API gave out', 'INVALID_CURSOR');
}

/** A page from `rows`, read with one more than `limit` to tell whether another page exists. */
export function toPage<T>(rows: T[], limit: number, position: (item: T) => Position): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  return { items, nextCursor: rows.length > limit ? encodeCursor(position(items[items.length - 1]!)) : null };
}
