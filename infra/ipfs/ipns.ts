// IPNS names and records. A name's Ed25519 key is made and kept here (sealed under the master
// key, in MongoDB), not in a Kubo keystore: any worker can sign, and a Kubo node replaced or
// lost loses no name. Records are built and signed with the `ipns` package and handed to Kubo
// with `routing put`, which stores them and serves them to other peers.
import crypto from 'node:crypto';
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import type { Ed25519PrivateKey, PrivateKey } from '@libp2p/interface';
import { peerIdFromPrivateKey, peerIdFromString } from '@libp2p/peer-id';
import { createIPNSRecord, marshalIPNSRecord, unmarshalIPNSRecord } from 'ipns';
import { base36 } from 'multiformats/bases/base36';
import { CID } from 'multiformats/cid';
import {
  IPNS_RECHECKS_MS,
  IPNS_RECORD_TTL_MS,
  IPNS_STORE_TIMEOUT_MS,
  IPNS_RECORD_VALIDITY_MS,
  IPNS_SIGNING_KEYS_KEPT,
} from '../constants.js';
import { KuboError, postStream, type Kubo } from './kubo.js';
import { seal, unseal } from '../secrets.js';

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

function unsealIpnsKey(masterKey: Buffer, sealedKey: string): PrivateKey {
  return privateKeyFromProtobuf(Buffer.from(unseal(masterKey, sealedKey), 'base64'));
}

/** Names' keys ready to sign, by sealed key; least recently used beyond IPNS_SIGNING_KEYS_KEPT. */
const signingKeys = new Map<string, PrivateKey>();

/**
 * The name's key, unsealed once and kept ready. An Ed25519 key signs with a Node key object
 * made once: @libp2p/crypto's own `sign` builds one from JWK for every signature, two a record
 * (measured: that import was 2.5% of the API's CPU in `npm run bench -- --ipns`). Keeping
 * unsealed keys in memory exposes nothing the process does not hold already: the master key.
 */
function signingKey(masterKey: Buffer, sealedKey: string): PrivateKey {
  const known = signingKeys.get(sealedKey);
  if (known) {
    signingKeys.delete(sealedKey);
    signingKeys.set(sealedKey, known);
    return known;
  }
  const unsealed = unsealIpnsKey(masterKey, sealedKey);
  const key = unsealed.type === 'Ed25519' ? withNodeKey(unsealed) : unsealed;
  signingKeys.set(sealedKey, key);
  if (signingKeys.size > IPNS_SIGNING_KEYS_KEPT) signingKeys.delete(signingKeys.keys().next().value!);
  return key;
}

function withNodeKey(key: Ed25519PrivateKey): Ed25519PrivateKey {
  const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');
  const nodeKey = crypto.createPrivateKey({
    format: 'jwk',
    key: { kty: 'OKP', crv: 'Ed25519', d: b64(key.raw.subarray(0, 32)), x: b64(key.publicKey.raw) },
  });
  return {
    type: 'Ed25519',
    raw: key.raw,
    publicKey: key.publicKey,
    equals: (other?: unknown) => key.equals(other),
    sign: (data) => crypto.sign(null, data instanceof Uint8Array ? data : data.subarray(), nodeKey),
  };
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

/**
 * Signs the name's record of this target and sequence (validity from now) with its sealed key
 * and stores it in Kubo: a publish and a republish alike. `contested`: another process may be
 * storing a lower sequence of the name at the same moment. Kubo compares a record with the one
 * it holds and then writes it, not as one step, so the lower can land last (measured: of 200
 * pairs of puts of sequences n and n + 1 sent at once, the lower stayed 89 times). So Kubo's
 * record is read back, and this one put again while it holds a lower one; and read again
 * IPNS_RECHECKS_MS later (in the background), for a lower put that lands later still (10 of
 * 300 such pairs did, after the first look).
 */
export async function storeIpnsRecord(
  kuboApiUrl: string,
  masterKey: Buffer,
  name: { ipnsName: string; sealedKey: string },
  cid: string,
  sequence: number,
  signal?: AbortSignal,
  contested = false,
): Promise<void> {
  const record = await signIpnsRecord(signingKey(masterKey, name.sealedKey), cid, sequence);
  await putIpnsRecord(kuboApiUrl, name.ipnsName, record, signal);
  if (!contestedNow(name.ipnsName, contested)) return;
  await keepHeld(kuboApiUrl, name.ipnsName, record, sequence, signal);
  for (const after of IPNS_RECHECKS_MS) {
    setTimeout(() => {
      const later = AbortSignal.timeout(IPNS_STORE_TIMEOUT_MS);
      keepHeld(kuboApiUrl, name.ipnsName, record, sequence, later).catch(() => undefined);
    }, after).unref();
  }
}

/**
 * Names this process stored a contested record of, until when their stores count as contested
 * too: another process's lower put can still land after this process's next publish of the
 * name, which by itself (its previous publish this process's) would not look.
 */
const contestedUntil = new Map<string, number>();

function contestedNow(ipnsName: string, contested: boolean): boolean {
  const now = Date.now();
  if (contested) {
    // Bounded like the keys kept: past as many names, the expired entries go.
    if (contestedUntil.size >= IPNS_SIGNING_KEYS_KEPT) {
      for (const [name, until] of contestedUntil) if (until <= now) contestedUntil.delete(name);
    }
    contestedUntil.set(ipnsName, now + IPNS_STORE_TIMEOUT_MS);
    return true;
  }
  const until = contestedUntil.get(ipnsName);
  if (until === undefined) return false;
  if (until > now) return true;
  contestedUntil.delete(ipnsName);
  return false;
}

/** Puts the record again while Kubo holds a lower sequence of the name (a few times at most:
 * each lower put that lands over it is another process's, and each is put once). */
async function keepHeld(kuboApiUrl: string, ipnsName: string, record: Uint8Array, sequence: number, signal?: AbortSignal): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const held = await heldIpnsSequence(kuboApiUrl, ipnsName, signal);
    if (held !== null && held >= sequence) return;
    await putIpnsRecord(kuboApiUrl, ipnsName, record, signal);
  }
}

/** The sequence of the name's record Kubo holds itself (`routing get`, offline: its own store,
 * not the network's), or null when it holds none. */
export async function heldIpnsSequence(kuboApiUrl: string, ipnsName: string, signal?: AbortSignal): Promise<number | null> {
  let answer: Record<string, unknown>[];
  try {
    answer = await postStream(kuboApiUrl, 'routing/get', [], { arg: `/ipns/${ipnsName}`, offline: true }, signal);
  } catch (err) {
    if (err instanceof KuboError && /not found/i.test(err.message)) return null;
    throw err;
  }
  const extra = answer.find((event) => typeof event.Extra === 'string' && event.Extra !== '')?.Extra as string | undefined;
  return extra === undefined ? null : readIpnsRecord(Buffer.from(extra, 'base64')).sequence;
}

/**
 * Stores the record in Kubo (`routing put`), which serves it to peers that resolve the name. On
 * node:http (infra/ipfs/kubo.ts `postStream`) rather than kubo-rpc-client's `routing.put`, whose
 * fetch cost the API about 1.9 ms of CPU per publish (measured: undici and the client were a
 * quarter of the API's busy time in `npm run bench -- --ipns`). The answer (routing events,
 * or an error) is read whole, so this returns once the put is done.
 */
export async function putIpnsRecord(kuboApiUrl: string, ipnsName: string, record: Uint8Array, signal?: AbortSignal): Promise<void> {
  const previous = putting.get(ipnsName);
  const mine = (previous ?? Promise.resolve()).then(() =>
    postStream(kuboApiUrl, 'routing/put', [record], { arg: `/ipns/${ipnsName}`, 'allow-offline': true }, signal),
  );
  const settled = mine.then(
    () => undefined,
    () => undefined,
  );
  putting.set(ipnsName, settled);
  try {
    await mine;
  } finally {
    if (putting.get(ipnsName) === settled) putting.delete(ipnsName);
  }
}

/**
 * The puts under way in this process, by name, each after the one before. Kubo compares a
 * record with the one it holds and then writes it, not as one step: two puts of a name at once
 * could leave the lower sequence (seen: 9 of 10 after 40 publishes of 4 names at once, whose
 * answers had all come). One at a time, the higher sequence stays, whichever comes last.
 */
const putting = new Map<string, Promise<void>>();

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
