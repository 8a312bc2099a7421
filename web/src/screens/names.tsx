// IPNS names: create one, publish a CID to it, resolve it, see its republish status, and get
// the DNSLink record that points a domain at it.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import type { ScreenProps } from '../route';
import { Cid, CopyButton, DeleteButton, ErrorNote, formatTime, Section, useAction } from '../ui';

interface IpnsKey {
  ipnsName: string;
  keyName: string;
  currentCid: string | null;
  sequence: number;
  status: string;
  lastPublishedAt: number | null;
  lastRepublishedAt: number | null;
}

function NameTools({ name, onChange }: { name: IpnsKey; onChange: () => void }) {
  const [cid, setCid] = useState('');
  const [domain, setDomain] = useState('');
  const [resolved, setResolved] = useState<{ cid: string; sequence: number } | null>(null);
  const [record, setRecord] = useState<{ name: string; value: string } | null>(null);
  const [run, error, busy] = useAction();
  const id = name.ipnsName.slice(-8);
  return (
    <div class="tools">
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            await api('POST', '/ipns/publish', { body: { ipnsName: name.ipnsName, cid: cid.trim() } });
            setCid('');
            onChange();
          });
        }}
      >
        <label>
          CID to publish <input id={`publish-${id}`} value={cid} onInput={(e) => setCid(e.currentTarget.value)} required />
        </label>
        <button type="submit" disabled={busy}>
          Publish
        </button>
      </form>
      <button
        type="button"
        disabled={busy}
        onClick={() => void run(async () => setResolved(await api('GET', `/ipns/resolve/${name.ipnsName}`)))}
        aria-label={`Resolve ${name.keyName}`}
      >
        Resolve
      </button>
      {resolved && (
        <span class="resolved" role="status">
          {' '}
          resolves to <Cid cid={resolved.cid} /> (sequence {resolved.sequence})
        </span>
      )}
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            const link = await api<{ record: { name: string; value: string } }>('GET', `/ipns/keys/${name.ipnsName}/dnslink`, {
              query: { domain: domain.trim() },
            });
            setRecord(link.record);
          });
        }}
      >
        <label>
          Domain for DNSLink <input value={domain} onInput={(e) => setDomain(e.currentTarget.value)} placeholder="example.com" required />
        </label>
        <button type="submit" disabled={busy}>
          Show record
        </button>
      </form>
      {record && (
        <p class="record">
          TXT <code>{record.name}</code> <code data-testid="dnslink-value">{record.value}</code> <CopyButton text={record.value} />
        </p>
      )}
      <ErrorNote error={error} />
    </div>
  );
}

export function NamesScreen(_props: ScreenProps) {
  const [names, setNames] = useState<IpnsKey[]>([]);
  const [newName, setNewName] = useState('');
  const [run, error, busy] = useAction();
  const reload = () => run(async () => setNames(await api<IpnsKey[]>('GET', '/ipns/keys')));
  useEffect(() => void reload(), []);

  return (
    <>
      <Section title="Create a name">
        <form
          class="inline"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              await api('POST', '/ipns/keys', { body: { name: newName.trim() } });
              setNewName('');
              setNames(await api<IpnsKey[]>('GET', '/ipns/keys'));
            });
          }}
        >
          <label>
            Key name <input value={newName} onInput={(e) => setNewName(e.currentTarget.value)} required />
          </label>
          <button type="submit" disabled={busy}>
            Create name
          </button>
        </form>
        <ErrorNote error={error} />
      </Section>
      <Section title="Names">
        {names.length === 0 && <p class="muted">No names yet.</p>}
        <ul class="cards">
          {names.map((n) => (
            <li key={n.ipnsName} data-name={n.keyName}>
              <h3>{n.keyName}</h3>
              <p>
                <code class="cid">{n.ipnsName}</code> <CopyButton text={n.ipnsName} label="Copy name" />
              </p>
              <dl>
                <dt>Points to</dt>
                <dd>{n.currentCid ? <Cid cid={n.currentCid} /> : 'nothing yet'}</dd>
                <dt>Republish status</dt>
                <dd class={`status ${n.status}`}>{n.status}</dd>
                <dt>Sequence</dt>
                <dd>{n.sequence}</dd>
                <dt>Last published</dt>
                <dd>{formatTime(n.lastPublishedAt)}</dd>
                <dt>Last republished</dt>
                <dd>{formatTime(n.lastRepublishedAt)}</dd>
              </dl>
              <NameTools name={n} onChange={() => void reload()} />
              <DeleteButton
                label={`name ${n.keyName}`}
                onConfirm={() => void run(async () => (await api('DELETE', `/ipns/keys/${n.ipnsName}`), reload()))}
              />
            </li>
          ))}
        </ul>
      </Section>
    </>
  );
}
