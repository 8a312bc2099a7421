// The filter of a page that continues a newest-first list after its last item.
//
// `field < at OR (field = at AND _id < id)` alone is an $or, which neither FerretDB's pushdown
// (stack/patches/ferretdb/0002-pushdown.patch) nor a MongoDB index bound can use; the
// redundant `field <= at` beside it can, so a page 10,000 items deep starts at its first item
// in the index instead of reading the 10,000 before it.
export function after(field: string, last: { at: number; id: string }): Record<string, unknown> {
  return {
    $and: [{ [field]: { $lte: last.at } }, { $or: [{ [field]: { $lt: last.at } }, { [field]: last.at, _id: { $lt: last.id } }] }],
  };
}

/** The same for an oldest-first list: `field > at OR (field = at AND _id > id)`. */
export function afterAscending(field: string, last: { at: number; id: string }): Record<string, unknown> {
  return {
    $and: [{ [field]: { $gte: last.at } }, { $or: [{ [field]: { $gt: last.at } }, { [field]: last.at, _id: { $gt: last.id } }] }],
  };
}
