// The activity of an IPNS name's job (workflows/ipns.ts): republish the current record, signed
// again with the same sequence and a new validity. Publishes are the API's (core/ipns.ts).
import { IPNS_STORE_TIMEOUT_MS } from '../infra/constants.js';
import type { IpnsNameRecord } from '../infra/db/ipns-names.js';
import { storeIpnsRecord } from '../infra/ipfs/ipns.js';
import { recordEvent } from '../core/webhook-events.js';
import type { ActivityDeps } from './deps.js';

export function createIpnsActivities(deps: ActivityDeps) {
  const { db, config } = deps;

  return {
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
        const signal = AbortSignal.timeout(IPNS_STORE_TIMEOUT_MS);
        const store = (record: IpnsNameRecord, contested: boolean) =>
          storeIpnsRecord(
            config.kubo.apiUrl,
            config.masterKey,
            { ipnsName: record._id, sealedKey: record.sealedKey },
            record.cid!,
            record.sequence,
            signal,
            contested,
          );
        await store(name, false);
        // A publish that moved the name on meanwhile may have stored its record in Kubo at the
        // same moment as this lower one, which can then land last (infra/ipfs/ipns.ts): its record
        // is stored again, read back until Kubo holds it. Read after the put has landed, so a
        // publish this misses stored its record after it.
        const now = await db.ipnsNames.get(input.ipnsName);
        if (now?.cid && now.sequence > name.sequence) await store(now, true);
      } catch (err) {
        await db.ipnsNames.republished(input.ipnsName, { error: (err as Error).message, at: Date.now() });
        return 'failed';
      }
      await db.ipnsNames.republished(input.ipnsName, { at: Date.now() });
      return 'stored';
    },

    /** Tells the account's webhooks that the name's republishing began to fail (once per run of failures). */
    async announceRepublishFailing(input: { userId: string; ipnsName: string; failingSince: number }): Promise<void> {
      const name = await db.ipnsNames.get(input.ipnsName);
      await recordEvent(deps, input.userId, {
        type: 'ipns.republish_failing',
        subject: `ipns:${input.ipnsName}`,
        id: `msg_republish_failing_${input.ipnsName}_${input.failingSince}`,
        data: {
          ipnsName: input.ipnsName,
          cid: name?.cid ?? null,
          failingSince: input.failingSince,
          error: name?.lastRepublishError ?? null,
        },
      });
    },
  };
}
