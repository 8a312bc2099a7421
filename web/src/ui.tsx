// Pieces every screen uses: an error note that reads the API's reason and details, a copy
// button, a two-step delete, a paged list, and the formats of sizes and times.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, type Page } from './api';

export function describe(err: unknown): string {
  if (err instanceof ApiError) return `${err.details || 'the request failed'} (${err.reason})`;
  return err instanceof Error ? err.message : String(err);
}

/** A failure, in words, announced to screen readers. */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {describe(error)}
    </p>
  );
}

/** Runs an action, keeping its failure to show and its busy state to disable the button. */
export function useAction(): [(fn: () => Promise<unknown>) => Promise<void>, unknown, boolean] {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }, []);
  return [run, error, busy];
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="small"
      onClick={async () => {
        await navigator.clipboard?.writeText(text).catch(() => undefined);
        setDone(true);
        setTimeout(() => setDone(false), 1500);
      }}
    >
      {done ? 'Copied' : label}
      <span class="visually-hidden" aria-live="polite">
        {done ? ' to the clipboard' : ''}
      </span>
    </button>
  );
}

/** A delete that asks once more in place (no modal dialog to trap the keyboard). */
export function DeleteButton({ label, onConfirm }: { label: string; onConfirm: () => void }) {
  const [asking, setAsking] = useState(false);
  if (!asking)
    return (
      <button type="button" class="small danger" aria-label={`Delete ${label}`} onClick={() => setAsking(true)}>
        Delete
      </button>
    );
  return (
    <span class="confirm">
      <button type="button" class="small danger" aria-label={`Confirm deleting ${label}`} onClick={onConfirm}>
        Confirm
      </button>
      <button type="button" class="small" onClick={() => setAsking(false)}>
        Keep
      </button>
    </span>
  );
}

/**
 * A list read a page at a time with the API's cursor: `load(cursor)` answers one page; `more`
 * appends the next. `reload` starts over (after a change).
 */
export function usePaged<T>(load: (cursor: string | null) => Promise<Page<T>>, deps: unknown[]) {
  const [items, setItems] = useState<T[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const fetchPage = async (cursor: string | null, append: boolean) => {
    setLoading(true);
    try {
      const page = await load(cursor);
      setItems((old) => (append ? [...old, ...page.items] : page.items));
      setNext(page.nextCursor);
      setError(null);
    } catch (err) {
      setError(err);
    } finally {
      setLoading(false);
    }
  };
  const reload = () => fetchPage(null, false);
  // The caller names what the list depends on, as with useEffect.
  useEffect(() => void reload(), deps);
  return { items, error, loading, reload, more: next ? () => fetchPage(next, true) : null };
}

/**
 * While `enabled`, reads `read()` every `everyMs` (the first time after one period) and hands
 * each value to `use`, which answers whether to go on; a failed read is tried again. Stops when
 * the component goes or `deps` change.
 */
export function usePolling<T>(enabled: boolean, read: () => Promise<T>, use: (value: T) => boolean, deps: unknown[], everyMs = 1000) {
  useEffect(() => {
    if (!enabled) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      let again = true;
      try {
        const value = await read();
        if (stopped) return;
        again = use(value);
      } catch {
        // tried again after the period
      }
      if (!stopped && again) timer = setTimeout(tick, everyMs);
    };
    timer = setTimeout(tick, everyMs);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [enabled, ...deps]);
}

export function MoreButton({ more, loading }: { more: (() => void) | null; loading: boolean }) {
  if (!more) return null;
  return (
    <button type="button" onClick={more} disabled={loading}>
      Load more
    </button>
  );
}

export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export const formatTime = (ms: number | null | undefined): string => (ms ? new Date(ms).toLocaleString() : '—');

export function Section({ title, children }: { title: string; children: ComponentChildren }) {
  return (
    <section aria-labelledby={slug(title)}>
      <h2 id={slug(title)}>{title}</h2>
      {children}
    </section>
  );
}

const slug = (s: string) => `h-${s.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;

/** A CID in monospace, whole (users compare and copy them). */
export const Cid = ({ cid }: { cid: string }) => <code class="cid">{cid}</code>;
