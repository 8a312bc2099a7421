/** MongoDB's duplicate-key error (E11000), raised by unique indexes. */
export const isDuplicateKey = (err: unknown): boolean => (err as { code?: number } | null)?.code === 11000;
