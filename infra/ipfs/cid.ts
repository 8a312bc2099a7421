// CIDs as the service takes and gives them: any CIDv0 (`Qm…`) or CIDv1 in any multibase in,
// CIDv1 base32 out. Holds are keyed by the multihash, so a CIDv0 and its CIDv1 form (and a
// raw and a dag-pb CID of the same bytes' hash) count as one piece of content.
import { bases } from 'multiformats/basics';
import { CID } from 'multiformats/cid';
import { base32 } from 'multiformats/bases/base32';

export interface ParsedCid {
  cid: CID;
  /** CIDv1, base32: how the service names content. */
  v1: string;
  /** The multihash, base32 (lower case, no prefix): the key of holds. */
  multihash: string;
}

type AnyDecoder = { or(other: unknown): AnyDecoder; decode(text: string): Uint8Array };
const decoders = (Object.values(bases).map((b) => b.decoder) as unknown as AnyDecoder[]).reduce((all, d) =>
  all.or(d),
) as unknown as Parameters<typeof CID.parse>[1];

export class CidError extends Error {}

export function parseCid(input: string): ParsedCid {
  const text = input.trim();
  let cid: CID;
  try {
    cid = text.startsWith('Qm') || text.startsWith('1') ? CID.parse(text) : CID.parse(text, decoders);
  } catch {
    throw new CidError(`${JSON.stringify(input.slice(0, 100))} is not a valid CID`);
  }
  const v1 = cid.version === 0 ? cid.toV1() : cid;
  return { cid: v1, v1: v1.toString(base32), multihash: base32.baseEncode(cid.multihash.bytes) };
}

export function tryParseCid(input: string): ParsedCid | undefined {
  try {
    return parseCid(input);
  } catch {
    return undefined;
  }
}

/** A CID as the service stores it (CIDv1, base32), read back by the thousand: decoded without
 * the per-CID string cache CID.parse builds (a third of parsing 10,000 of them). */
export function storedCid(v1: string): CID {
  return CID.decode(base32.decode(v1));
}
