// IPNS names and records. A name's Ed25519 key is made and kept here (sealed under the master
// key, in MongoDB), not in a Kubo keystore: any worker can sign, and a Kubo node replaced or
// lost loses no name. Records are built and signed with the `ipns` package and handed to Kubo
// with `routing put`, which stores them and serves them to other peers.
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';
import { peerIdFromPrivateKey, peerIdFromString } from '@libp2p/peer-id';
import { createIPNSRecord, marshalIPNSRecord, unmarshalIPNSRecord } from 'ipns';
import { base36 } from 'multiformats/bases/base36';
import { CID } from 'multiformats/cid';
import { IPNS_RECORD_TTL_MS, IPNS_RECORD_VALIDITY_MS } from './constants.js';
import { postStream, type Kubo } from './kubo.js';
import { seal, unseal } from './secrets.js';

/** The libp2p-key multicodec: a name as a CID. */
const LIBP2P_KEY = 0x72;

export class IpnsNameError extends Error {}

/** A name in any form Kubo takes (k51…, 12D3Koo…, Qm…, a libp2p-key CID in another base),
 * as the service writes it: the base36 CIDv1 (`k51…` for Ed25519 keys). */
export function parseIpnsName(input: string): string {
  const text = input.trim();
  try {
    const peerId = /^(Qm|12D3Koo|16Uiu2)/.test(text) ? peerIdFromString(text) : peerIdFromString(text, base36);
    return peerId.toCID().toString(base36);
  } catch {
    try {
      // A libp2p-key CID in another multibase.
      const cid = CID.parse(text);
      if (cid.code !== LIBP2P_KEY) throw new Error('not a libp2p-key CID');
      return CID.createV1(LIBP2P_KEY, cid.multihash).toString(base36);
    } catch {
      throw new IpnsNameError(`${JSON.stringify(text.slice(0, 100))} is not an IPNS name`);
    }
  }
}

/** A new name: its `k51…` form and its private key sealed under the master key. */
export async function newIpnsKey(masterKey: Buffer): Promise<{ ipnsName: string; sealedKey: string }> {
  const key = await generateKeyPair('Ed25519');
  const ipnsName = peerIdFromPrivateKey(key).toCID().toString(base36);
  return { ipnsName, sealedKey: seal(masterKey, Buffer.from(privateKeyToProtobuf(key)).toString('base64')) };
}

export function unsealIpnsKey(masterKey: Buffer, sealedKey: string): PrivateKey {
  return privateKeyFromProtobuf(Buffer.from(unseal(masterKey, sealedKey), 'base64'));
}

/** A signed record pointing the name at `/ipfs/<cid>` (V1 and V2 signatures), valid 48 h from
 * now, TTL 5 min. Republishing signs the same sequence and value again with a later validity. */
export async function signIpnsRecord(key: PrivateKey, cid: string, sequence: number): Promise<Uint8Array> {
  const record = await createIPNSRecord(key, `/ipfs/${cid}`, BigInt(sequence), IPNS_RECORD_VALIDITY_MS, {
    v1Compatible: true,
    ttlNs: BigInt(IPNS_RECORD_TTL_MS) * 1_000_000n,
  });
  return marshalIPNSRecord(record);
}

/** What a record says: its target path, sequence and validity (RFC 3339). */
export function readIpnsRecord(bytes: Uint8Array): { value: string; sequence: number; validity: string } {
  const record = unmarshalIPNSRecord(bytes);
  return { value: record.value, sequence: Number(record.sequence), validity: record.validity };
}

/** Signs the name's record of this target and sequence (validity from now) with its sealed key
 * and stores it in Kubo: a publish and a republish alike. */
export async function storeIpnsRecord(
  kuboApiUrl: string,
  masterKey: Buffer,
  name: { ipnsName: string; sealedKey: string },
  cid: string,
  sequence: number,
  signal?: AbortSignal,
): Promise<void> {
  const record = await signIpnsRecord(unsealIpnsKey(masterKey, name.sealedKey), cid, sequence);
  await putIpnsRecord(kuboApiUrl, name.ipnsName, record, signal);
}

/**
 * Stores the record in Kubo (`routing put`), which serves it to peers that resolve the name. On
 * node:http (infra/kubo.ts `postStream`) rather than kubo-rpc-client's `routing.put`, whose
 * fetch cost the API about 1.9 ms of CPU per publish (measured: undici and the client were a
 * quarter of the API's busy time in `npm run bench -- --ipns`). The answer (routing events,
 * or an error) is read whole, so this returns once the put is done.
 */
export async function putIpnsRecord(kuboApiUrl: string, ipnsName: string, record: Uint8Array, signal?: AbortSignal): Promise<void> {
  await postStream(kuboApiUrl, 'routing/put', [record], { arg: `/ipns/${ipnsName}`, 'allow-offline': true }, signal);
}

/** The CID a name points at, resolved by Kubo (its cache skipped); null when it resolves to
 * nothing within the signal's time. Kubo unreachable is thrown. */
export async function resolveThroughKubo(kubo: Kubo, ipnsName: string, signal: AbortSignal): Promise<string | null> {
  try {
    for await (const path of kubo.name.resolve(`/ipns/${ipnsName}`, { nocache: true, recursive: true, signal })) {
      const match = /^\/ipfs\/([^/]+)/.exec(path);
      if (match) return match[1]!;
    }
    return null;
  } catch (err) {
    // Kubo answered that nothing resolves, or the time ran out.
    if (signal.aborted || /resolve|not found|routing/i.test((err as Error).message)) return null;
    throw err;
  }
}
