// The schema type of byte counts: a BSON double. The driver stores a whole number within int32's
// range as an int32, and FerretDB 1.24 keeps an int32 field an int32 under `$inc` by an int32,
// wrapping past 2^31 (measured: 2^30 + 2^30 gave -2^31; MongoDB would promote to a 64-bit
// integer). Mongoose casts every value of such a path, `$inc` operands included, to a double,
// and a sum with a double stays a double: exact for whole numbers up to 2^53 (8 PiB).
// tests/usage.test.ts counts past 4 GiB.
import { Schema } from 'mongoose';

// Typed as Number: records read back hold JS numbers (the driver promotes doubles).
export const BYTES = Schema.Types.Double as unknown as NumberConstructor;
