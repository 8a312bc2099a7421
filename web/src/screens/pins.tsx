// Pins: ask the service to pin a CID (with peers that have it), watch its status live until it
// is pinned or failed, and remove it. The list is the Pinning Service API's (/psa/pins): the
// same requests as /pin, with every status and paging by creation time.
import { useState } from 'preact/hooks';
import { api } from '../api';
import type { ScreenProps } from '../route';
import { Cid, DeleteButton, ErrorNote, MoreButton, Section, useAction, usePaged, usePolling } from '../ui';

const PAGE = 20;

interface PsaPin {
  requestid: string;
  status: string;
  created: string;
  pin: { cid: string; name?: string; origins: string[] };
}
interface Pin {
  cid: string;
  status: string;
  error: { reason: string; details: string } | null;
}

/** A row that reads its pin's status every second until it is final (pinned or failed). */
function PinRow({ item, onDelete }: { item: PsaPin; onDelete: () => void }) {
  const [pin, setPin] = useState<Pin | null>(null);
  const status = pin?.status ?? item.status;
  // The list's status is current when read; only a pin on its way is followed.
  const onItsWay = (st: string) => st === 'queued' || st === 'pinning';
  usePolling(
    onItsWay(item.status),
    () => api<Pin>('GET', `/pins/${item.pin.cid}`),
    (now) => {
      setPin(now);
      return onItsWay(now.status);
    },
    [item.requestid],
  );
  return (
    <tr data-cid={item.pin.cid} data-status={status}>
      <td>
        <Cid cid={item.pin.cid} />
      </td>
      <td>{item.pin.name ?? ''}</td>
      <td>
        <span class={`status ${status}`} role="status">
          {status}
        </span>
        {pin?.error && <span class="error"> {pin.error.details}</span>}
      </td>
      <td>{new Date(item.created).toLocaleString()}</td>
      <td>
        <DeleteButton label={`pin ${item.pin.cid}`} onConfirm={onDelete} />
      </td>
    </tr>
  );
}

export function PinsScreen(_props: ScreenProps) {
  const [cid, setCid] = useState('');
  const [name, setName] = useState('');
  const [origins, setOrigins] = useState('');
  const [run, error, busy] = useAction();
  const pins = usePaged<PsaPin>(async (cursor) => {
    const page = await api<{ count: number; results: PsaPin[] }>('GET', '/psa/pins', {
      query: { status: 'queued,pinning,pinned,failed', limit: PAGE, before: cursor },
    });
    return { items: page.results, nextCursor: page.results.length === PAGE ? page.results.at(-1)!.created : null };
  }, []);

  return (
    <>
      <Section title="Pin a CID">
        <form
          class="stack"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              const list = origins
                .split(/\s+/)
                .map((o) => o.trim())
                .filter(Boolean);
              await api('POST', '/pin', { body: { cid: cid.trim(), ...(name.trim() ? { name: name.trim() } : {}), origins: list } });
              setCid('');
              setName('');
              setOrigins('');
              await pins.reload();
            });
          }}
        >
          <label>
            CID <input value={cid} onInput={(e) => setCid(e.currentTarget.value)} required />
          </label>
          <label>
            Name (optional) <input value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </label>
          <label>
            Origins: multiaddresses of peers that have it, one per line (optional)
            <textarea rows={3} value={origins} onInput={(e) => setOrigins(e.currentTarget.value)} />
          </label>
          <button type="submit" disabled={busy}>
            Pin
          </button>
        </form>
        <ErrorNote error={error} />
      </Section>
      <Section title="Pins">
        <ErrorNote error={pins.error} />
        <table>
          <thead>
            <tr>
              <th scope="col">CID</th>
              <th scope="col">Name</th>
              <th scope="col">Status</th>
              <th scope="col">Requested</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {pins.items.map((p) => (
              <PinRow
                key={p.requestid}
                item={p}
                onDelete={() => void run(async () => (await api('DELETE', `/pins/${p.pin.cid}`), pins.reload()))}
              />
            ))}
          </tbody>
        </table>
        {!pins.loading && pins.items.length === 0 && <p class="muted">No pins yet.</p>}
        <MoreButton more={pins.more} loading={pins.loading} />
      </Section>
    </>
  );
}
