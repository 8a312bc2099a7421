// Activities of an IPNS name's job (workflows/ipns.ts): point the name at a new target in
// MongoDB (the sequence raised atomically there), sign and store records in Kubo, and
// republish the current record.
import { ApplicationFailure } from '@temporalio/activity';
import { parseCid } from '../infra/cid.js';
import { announceHoldChangeIfAlone } from '../infra/hold-sync.js';
import { putIpnsRecord, signIpnsRecord, unsealIpnsKey } from '../infra/ipns.js';
import type { IpnsPublished } from '../infra/temporal/contracts/ipns.js';
import type { ActivityDeps } from './index.js';

const gone = (ipnsName: string) => ApplicationFailure.nonRetryable(`IPNS name ${ipnsName} does not exist`, 'IpnsNameGone');

export function createIpnsActivities(deps: ActivityDeps) {
  const { db, kubo, config } = deps;

  async function store(ipnsName: string, sealedKey: string, cid: string, sequence: number): Promise<void> {
    const record = await signIpnsRecord(unsealIpnsKey(config.masterKey, sealedKey), cid, sequence);
    await putIpnsRecord(kubo, ipnsName, record, AbortSignal.timeout(20_000));
  }

  return {
    /** The name's next record: the new target and the next sequence, in one update. The name
     * now holds the new target, and the previous one is released unless held otherwise. */
    async advanceIpnsName(input: { ipnsName: string; cid: string }): Promise<IpnsPublished> {
      const target = parseCid(input.cid);
      const at = Date.now();
      const advanced = await db.ipnsNames.advance(input.ipnsName, { cid: target.v1, multihash: target.multihash }, at);
      if (!advanced) throw gone(input.ipnsName);
      const self = { kind: 'ipns', key: input.ipnsName };
      const before = advanced.previous;
      if (before.multihash !== target.multihash) await announceHoldChangeIfAlone(deps, target.multihash, target.v1, self, 'added');
      if (before.multihash && before.cid && before.multihash !== target.multihash)
        await announceHoldChangeIfAlone(deps, before.multihash, before.cid, self, 'removed');
      return { ipnsName: input.ipnsName, cid: target.v1, sequence: advanced.sequence, publishedAt: at };
    },

    /** Signs the record of this target and sequence and stores it in Kubo. */
    async storeIpnsRecord(input: { ipnsName: string; cid: string; sequence: number }): Promise<void> {
      const name = await db.ipnsNames.get(input.ipnsName);
      if (!name) throw gone(input.ipnsName);
      await store(input.ipnsName, name.sealedKey, input.cid, input.sequence);
    },

    /**
     * Signs the name's current record again (same target and sequence, validity from now) and
     * stores it. A failure is recorded on the name, which its status shows, and answered as
     * `failed`: the job tries again soon.
     */
    async republishIpnsName(input: { ipnsName: string }): Promise<'stored' | 'nothing' | 'failed' | 'gone'> {
      const name = await db.ipnsNames.get(input.ipnsName);
      if (!name) return 'gone';
      if (!name.cid) return 'nothing';
      try {
        await store(input.ipnsName, name.sealedKey, name.cid, name.sequence);
      } catch (err) {
        await db.ipnsNames.republished(input.ipnsName, { error: (err as Error).message, at: Date.now() });
        return 'failed';
      }
      await db.ipnsNames.republished(input.ipnsName, { at: Date.now() });
      return 'stored';
    },
  };
}
