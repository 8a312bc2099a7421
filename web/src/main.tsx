// The console: a key prompt, then one screen per part of the service, chosen by the URL's
// hash (#/files, #/pins, …) so the browser's back button and links work without a server
// route per screen. Preact (4 KB) renders; see README "Web console" for why.
import 'uplot/dist/uPlot.min.css';
import './console.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, forgetKey, rememberKey, storedKey, whenUnauthorized, type Profile } from './api';
import { ErrorNote } from './ui';
import { link, readRoute } from './route';
import { FilesScreen } from './screens/files';
import { PinsScreen } from './screens/pins';
import { KeysScreen } from './screens/keys';
import { NamesScreen } from './screens/names';
import { GatewayScreen } from './screens/gateway';
import { UsageScreen } from './screens/usage';
import { S3Screen } from './screens/s3';
import { WebhooksScreen } from './screens/webhooks';

const SCREENS = [
  { path: 'files', title: 'Files', view: FilesScreen },
  { path: 'pins', title: 'Pins', view: PinsScreen },
  { path: 'keys', title: 'API keys', view: KeysScreen },
  { path: 'names', title: 'IPNS names', view: NamesScreen },
  { path: 'gateway', title: 'Gateway and tokens', view: GatewayScreen },
  { path: 'webhooks', title: 'Webhooks', view: WebhooksScreen },
  { path: 'usage', title: 'Usage', view: UsageScreen },
  { path: 's3', title: 'S3', view: S3Screen },
] as const;

function KeyPrompt({ onKey, reason }: { onKey: (key: string) => void; reason: string | null }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      // The profile is the cheapest call that proves the key works.
      await api<Profile>('GET', '/user/profile', { key: key.trim() });
      rememberKey(key.trim());
      onKey(key.trim());
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="prompt">
      <h1>Stupa console</h1>
      {reason && (
        <p class="error" role="alert">
          {reason}
        </p>
      )}
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input id="api-key" type="password" autocomplete="off" value={key} onInput={(e) => setKey(e.currentTarget.value)} required />
        <p class="hint">Kept in this tab only (sessionStorage), sent as the X-Api-Key header; never stored in a cookie.</p>
        <button type="submit" disabled={busy || !key.trim()}>
          Sign in
        </button>
      </form>
      <ErrorNote error={error} />
    </main>
  );
}

function App() {
  const [key, setKey] = useState(storedKey());
  const [route, setRoute] = useState(readRoute());
  const [signedOutReason, setSignedOutReason] = useState<string | null>(null);
  const [profile, setProfile] = useState<Profile | null>(null);

  useEffect(() => {
    const onHash = () => setRoute(readRoute());
    addEventListener('hashchange', onHash);
    whenUnauthorized(() => {
      setSignedOutReason('The service no longer accepts this key (revoked or expired). Enter a key to go on.');
      setKey(null);
    });
    return () => removeEventListener('hashchange', onHash);
  }, []);

  const refreshProfile = () => void api<Profile>('GET', '/user/profile').then(setProfile, () => setProfile(null));
  useEffect(() => {
    if (key) refreshProfile();
  }, [key]);

  if (!key)
    return (
      <KeyPrompt
        reason={signedOutReason}
        onKey={(k) => {
          setSignedOutReason(null);
          setKey(k);
          if (!location.hash) location.hash = link('files');
        }}
      />
    );

  const current = SCREENS.find((s) => s.path === route.screen) ?? SCREENS[0];
  const View = current.view;
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header>
        <span class="brand">Stupa</span>
        <nav aria-label="Screens">
          <ul>
            {SCREENS.map((s) => (
              <li key={s.path}>
                <a href={link(s.path)} aria-current={s === current ? 'page' : undefined}>
                  {s.title}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="account">{profile ? `${profile.email} · ${profile.plan}` : ''}</span>
        <button
          type="button"
          class="small"
          onClick={() => {
            forgetKey();
            setKey(null);
          }}
        >
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        <h1>{current.title}</h1>
        <View route={route} profile={profile} refreshProfile={refreshProfile} />
      </main>
    </>
  );
}

document.title = 'Stupa console';
render(<App />, document.getElementById('app')!);
