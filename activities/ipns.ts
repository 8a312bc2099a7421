// The activity of an IPNS name's job (workflows/ipns.ts): republish the current record, signed
// again with the same sequence and a new validity. Publishes are the API's (api/usecases/ipns.ts).
import { IPNS_STORE_TIMEOUT_MS } from '../infra/constants.js';
import { storeIpnsRecord } from '../infra/ipns.js';
import type { ActivityDeps } from './deps.js';

export function createIpnsActivities(deps: ActivityDeps) {
  const { db, kubo, config } = deps;

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
        await storeIpnsRecord(kubo, config.masterKey, { ipnsName: name._id, sealedKey: name.sealedKey }, name.cid, name.sequence, signal);
      } catch (err) {
        await db.ipnsNames.republished(input.ipnsName, { error: (err as Error).message, at: Date.now() });
        return 'failed';
      }
      await db.ipnsNames.republished(input.ipnsName, { at: Date.now() });
      return 'stored';
    },
  };
}
