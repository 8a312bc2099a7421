// The account's gateway: its address and settings (token required, IP allowlist, allowed
// origins), its access tokens, and signed upload tokens (uploads without an API key).
import { useEffect, useState } from 'preact/hooks';
import { api, type Page } from '../api';
import type { ScreenProps } from '../route';
import { CopyButton, DeleteButton, ErrorNote, formatTime, MoreButton, Section, useAction, usePaged } from '../ui';

interface GatewayToken {
  tokenPrefix: string;
  name: string;
  createdAt: number;
  lastUsedAt: number | null;
  expiresAt: number | null;
}
interface SignedToken {
  tokenId: string;
  tokenPrefix: string;
  tokenName: string;
  folderId: string | null;
  maxUses: number | null;
  useCount: number;
  expiresAt: number;
  revoked: boolean;
}

const lines = (text: string) =>
  text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);

/** A secret shown once, with a copy button. */
function Secret({ label, value, onDone }: { label: string; value: string; onDone: () => void }) {
  return (
    <div class="secret" role="status">
      <p>{label}: shown this once, copy it now.</p>
      <code data-testid="new-secret">{value}</code> <CopyButton text={value} />{' '}
      <button type="button" class="small" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

function Settings({ profile, refreshProfile }: Pick<ScreenProps, 'profile' | 'refreshProfile'>) {
  const [tokenRequired, setTokenRequired] = useState(false);
  const [ips, setIps] = useState('');
  const [origins, setOrigins] = useState('');
  const [saved, setSaved] = useState(false);
  const [run, error, busy] = useAction();
  useEffect(() => {
    if (!profile) return;
    setTokenRequired(profile.gatewayTokenRequired);
    setIps(profile.gatewayIpAllowlist.join('\n'));
    setOrigins(profile.gatewayAllowedOrigins.join('\n'));
  }, [profile]);
  if (!profile) return null;
  return (
    <Section title="Gateway settings">
      <p>
        Address: <a href={profile.gatewayUrl}>{profile.gatewayUrl}</a> <CopyButton text={profile.gatewayUrl} />
      </p>
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            setSaved(false);
            await api('PUT', '/gateway-settings', { body: { tokenRequired, ipAllowlist: lines(ips), allowedOrigins: lines(origins) } });
            refreshProfile();
            setSaved(true);
          });
        }}
      >
        <label class="check">
          <input type="checkbox" checked={tokenRequired} onChange={(e) => setTokenRequired(e.currentTarget.checked)} /> Require a gateway
          token
        </label>
        <label>
          IP allowlist: addresses or CIDR ranges, one per line (empty: any address)
          <textarea rows={3} value={ips} onInput={(e) => setIps(e.currentTarget.value)} />
        </label>
        <label>
          Allowed origins: one per line (empty: any origin)
          <textarea rows={3} value={origins} onInput={(e) => setOrigins(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={busy}>
          Save settings
        </button>
        {saved && <span role="status">Saved.</span>}
      </form>
      <ErrorNote error={error} />
    </Section>
  );
}

function GatewayTokens() {
  const [tokens, setTokens] = useState<GatewayToken[]>([]);
  const [name, setName] = useState('');
  const [created, setCreated] = useState<string | null>(null);
  const [run, error, busy] = useAction();
  const reload = async () => setTokens(await api<GatewayToken[]>('GET', '/gateway-tokens'));
  useEffect(() => void run(reload), []);
  return (
    <Section title="Gateway tokens">
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            setCreated((await api<{ token: string }>('POST', '/gateway-tokens', { body: { name: name.trim() } })).token);
            setName('');
            await reload();
          });
        }}
      >
        <label>
          Token name <input value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        </label>
        <button type="submit" disabled={busy}>
          Create gateway token
        </button>
      </form>
      {created && <Secret label="The gateway token" value={created} onDone={() => setCreated(null)} />}
      <ErrorNote error={error} />
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Prefix</th>
            <th scope="col">Created</th>
            <th scope="col">Last used</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {tokens.map((t) => (
            <tr key={t.tokenPrefix}>
              <td>{t.name}</td>
              <td>
                <code>{t.tokenPrefix}</code>
              </td>
              <td>{formatTime(t.createdAt)}</td>
              <td>{formatTime(t.lastUsedAt)}</td>
              <td>
                <DeleteButton
                  label={`gateway token ${t.name}`}
                  onConfirm={() => void run(async () => (await api('DELETE', `/gateway-tokens/${t.tokenPrefix}`), reload()))}
                />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </Section>
  );
}

function SignedTokens() {
  const [name, setName] = useState('');
  const [hours, setHours] = useState('1');
  const [types, setTypes] = useState('');
  const [created, setCreated] = useState<string | null>(null);
  const [run, error, busy] = useAction();
  const list = usePaged<SignedToken>((cursor) => api<Page<SignedToken>>('GET', '/signed-tokens', { query: { cursor, limit: 20 } }), []);
  return (
    <Section title="Signed upload tokens">
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => {
            const body: Record<string, unknown> = { name: name.trim(), expiresIn: Math.round(Number(hours) * 3600) };
            if (lines(types).length) body.allowedMimeTypes = lines(types);
            setCreated((await api<{ token: string }>('POST', '/upload/signed-url', { body })).token);
            setName('');
            await list.reload();
          });
        }}
      >
        <label>
          Token name <input value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        </label>
        <label>
          Valid for hours (at most 168){' '}
          <input type="number" min="0.01" max="168" step="any" value={hours} onInput={(e) => setHours(e.currentTarget.value)} />
        </label>
        <label>
          Allowed types (optional, e.g. image/*) <input value={types} onInput={(e) => setTypes(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={busy}>
          Create upload token
        </button>
      </form>
      {created && <Secret label="The upload token (send it as Authorization: Signed …)" value={created} onDone={() => setCreated(null)} />}
      <ErrorNote error={error} />
      <ErrorNote error={list.error} />
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Prefix</th>
            <th scope="col">Uses</th>
            <th scope="col">Expires</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {list.items.map((t) => (
            <tr key={t.tokenId}>
              <td>{t.tokenName}</td>
              <td>
                <code>{t.tokenPrefix}</code>
              </td>
              <td>
                {t.useCount}
                {t.maxUses ? ` of ${t.maxUses}` : ''}
              </td>
              <td>{t.revoked ? 'revoked' : formatTime(t.expiresAt)}</td>
              <td>
                {!t.revoked && (
                  <DeleteButton
                    label={`upload token ${t.tokenName}`}
                    onConfirm={() => void run(async () => (await api('DELETE', `/signed-tokens/${t.tokenId}`), list.reload()))}
                  />
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <MoreButton more={list.more} loading={list.loading} />
    </Section>
  );
}

export function GatewayScreen({ profile, refreshProfile }: ScreenProps) {
  return (
    <>
      <Settings profile={profile} refreshProfile={refreshProfile} />
      <GatewayTokens />
      <SignedTokens />
    </>
  );
}
