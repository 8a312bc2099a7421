// Webhooks: endpoints that receive the account's events (their signing secret shown once),
// paused or resumed, sent a test event, and each one's delivery log with redelivery. The event
// types are read from the service's OpenAPI document, so the list is the service's own.
import { useEffect, useState } from 'preact/hooks';
import { api, type Page } from '../api';
import type { ScreenProps } from '../route';
import { CopyButton, DeleteButton, ErrorNote, formatTime, MoreButton, Section, useAction, usePaged } from '../ui';

interface Webhook {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabledReason: string | null;
}
interface Delivery {
  id: string;
  eventType: string;
  state: string;
  createdAt: number;
  nextAttemptAt: number | null;
  attempts: { statusCode: number | null; error: string | null }[];
}

function useEventTypes(): string[] {
  const [types, setTypes] = useState<string[]>([]);
  useEffect(() => {
    fetch('/openapi.json')
      .then((r) => r.json())
      .then((doc: { components: { schemas: { WebhookEventType: { enum: string[] } } } }) =>
        setTypes(doc.components.schemas.WebhookEventType.enum),
      )
      .catch(() => setTypes([]));
  }, []);
  return types;
}

function Deliveries({ webhook }: { webhook: Webhook }) {
  const [run, error, busy] = useAction();
  const log = usePaged<Delivery>(
    (cursor) => api<Page<Delivery>>('GET', `/webhooks/${webhook.id}/deliveries`, { query: { cursor, limit: 10 } }),
    [webhook.id],
  );
  return (
    <div class="tools">
      <button
        type="button"
        disabled={busy}
        aria-label={`Send a test event to ${webhook.url}`}
        onClick={() => void run(async () => (await api('POST', `/webhooks/${webhook.id}/test`), log.reload()))}
      >
        Send a test event
      </button>{' '}
      <button type="button" class="small" onClick={() => void log.reload()} aria-label={`Refresh the deliveries of ${webhook.url}`}>
        Refresh
      </button>
      <ErrorNote error={error ?? log.error} />
      <table>
        <thead>
          <tr>
            <th scope="col">Event</th>
            <th scope="col">State</th>
            <th scope="col">Happened</th>
            <th scope="col">Last answer</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {log.items.map((d) => {
            const last = d.attempts.at(-1);
            return (
              <tr key={d.id} data-event={d.eventType} data-state={d.state}>
                <td>{d.eventType}</td>
                <td class={`status ${d.state}`}>{d.state}</td>
                <td>{formatTime(d.createdAt)}</td>
                <td>{last ? (last.statusCode ?? last.error ?? '—') : '—'}</td>
                <td>
                  {d.state === 'failed' && (
                    <button
                      type="button"
                      class="small"
                      onClick={() =>
                        void run(async () => (await api('POST', `/webhooks/${webhook.id}/deliveries/${d.id}/redeliver`), log.reload()))
                      }
                    >
                      Redeliver
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <MoreButton more={log.more} loading={log.loading} />
    </div>
  );
}

export function WebhooksScreen(_props: ScreenProps) {
  const types = useEventTypes();
  const [url, setUrl] = useState('');
  const [chosen, setChosen] = useState<Set<string>>(new Set());
  const [secret, setSecret] = useState<string | null>(null);
  const [run, error, busy] = useAction();
  const hooks = usePaged<Webhook>((cursor) => api<Page<Webhook>>('GET', '/webhooks', { query: { cursor, limit: 20 } }), []);
  const toggle = (type: string) =>
    setChosen((old) => {
      const next = new Set(old);
      if (!next.delete(type)) next.add(type);
      return next;
    });

  return (
    <>
      <Section title="Add a webhook">
        <form
          class="stack"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              setSecret((await api<{ secret: string }>('POST', '/webhooks', { body: { url: url.trim(), events: [...chosen] } })).secret);
              setUrl('');
              setChosen(new Set());
              await hooks.reload();
            });
          }}
        >
          <label>
            Endpoint URL (https://…) <input type="url" value={url} onInput={(e) => setUrl(e.currentTarget.value)} required />
          </label>
          <fieldset>
            <legend>Events</legend>
            {types.map((t) => (
              <label key={t} class="check">
                <input type="checkbox" checked={chosen.has(t)} onChange={() => toggle(t)} /> {t}
              </label>
            ))}
          </fieldset>
          <button type="submit" disabled={busy || chosen.size === 0}>
            Add webhook
          </button>
        </form>
        {secret && (
          <div class="secret" role="status">
            <p>The signing secret (Standard Webhooks): shown this once, copy it now.</p>
            <code data-testid="new-secret">{secret}</code> <CopyButton text={secret} />{' '}
            <button type="button" class="small" onClick={() => setSecret(null)}>
              Done
            </button>
          </div>
        )}
        <ErrorNote error={error} />
      </Section>
      <Section title="Webhooks">
        <ErrorNote error={hooks.error} />
        {!hooks.loading && hooks.items.length === 0 && <p class="muted">No webhooks yet.</p>}
        <ul class="cards">
          {hooks.items.map((h) => (
            <li key={h.id} data-webhook={h.id}>
              <h3>{h.url}</h3>
              <p>
                {h.events.join(', ')} · {h.enabled ? 'enabled' : `paused${h.disabledReason ? `: ${h.disabledReason}` : ''}`}
              </p>
              <button
                type="button"
                class="small"
                onClick={() =>
                  void run(async () => (await api('PUT', `/webhooks/${h.id}`, { body: { enabled: !h.enabled } }), hooks.reload()))
                }
              >
                {h.enabled ? 'Pause' : 'Resume'}
              </button>{' '}
              <DeleteButton
                label={`webhook ${h.url}`}
                onConfirm={() => void run(async () => (await api('DELETE', `/webhooks/${h.id}`), hooks.reload()))}
              />
              <Deliveries webhook={h} />
            </li>
          ))}
        </ul>
        <MoreButton more={hooks.more} loading={hooks.loading} />
      </Section>
    </>
  );
}
