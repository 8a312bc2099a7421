// API keys: create one (its secret is shown once, with a copy button), list them, delete one.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import type { ScreenProps } from '../route';
import { CopyButton, DeleteButton, ErrorNote, formatTime, Section, useAction } from '../ui';

interface ApiKey {
  keyPrefix: string;
  keyName: string;
  createdAt: number;
  expiresAt: number;
  lastUsedAt: number | null;
}

export function KeysScreen(_props: ScreenProps) {
  const [keys, setKeys] = useState<ApiKey[]>([]);
  const [name, setName] = useState('');
  const [days, setDays] = useState('');
  const [created, setCreated] = useState<{ apiKey: string; keyName: string } | null>(null);
  const [run, error, busy] = useAction();
  const reload = () => run(async () => setKeys(await api<ApiKey[]>('GET', '/apikeys')));
  useEffect(() => void reload(), []);

  return (
    <>
      <Section title="Create a key">
        <form
          class="inline"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              const body: Record<string, unknown> = { name: name.trim() };
              if (days.trim()) body.expiresIn = Math.round(Number(days) * 86400);
              setCreated(await api('POST', '/apikeys', { body }));
              setName('');
              setDays('');
              setKeys(await api<ApiKey[]>('GET', '/apikeys'));
            });
          }}
        >
          <label>
            Name <input value={name} onInput={(e) => setName(e.currentTarget.value)} required />
          </label>
          <label>
            Expires in days (optional) <input type="number" min="1" step="1" value={days} onInput={(e) => setDays(e.currentTarget.value)} />
          </label>
          <button type="submit" disabled={busy}>
            Create key
          </button>
        </form>
        {created && (
          <div class="secret" role="status">
            <p>
              The key <strong>{created.keyName}</strong>. It is shown this once: copy it now.
            </p>
            <code data-testid="new-secret">{created.apiKey}</code> <CopyButton text={created.apiKey} />{' '}
            <button type="button" class="small" onClick={() => setCreated(null)}>
              Done
            </button>
          </div>
        )}
      </Section>
      <Section title="Keys">
        <ErrorNote error={error} />
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Prefix (S3 access key id)</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
              <th scope="col">Last used</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {keys.map((k) => (
              <tr key={k.keyPrefix} data-prefix={k.keyPrefix}>
                <td>{k.keyName}</td>
                <td>
                  <code>{k.keyPrefix}</code>
                </td>
                <td>{formatTime(k.createdAt)}</td>
                <td>{formatTime(k.expiresAt)}</td>
                <td>{formatTime(k.lastUsedAt)}</td>
                <td>
                  <DeleteButton
                    label={`key ${k.keyName}`}
                    onConfirm={() => void run(async () => (await api('DELETE', `/apikeys/${k.keyPrefix}`), reload()))}
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
    </>
  );
}
