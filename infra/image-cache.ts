// A disk cache of image derivatives (GET /image/:cid), content-addressed: an entry's key is a
// hash of everything its bytes depend on, so an entry never goes stale and is only ever
// evicted, least recently used first, when the directory would pass its size limit.
//
// Layout: <dir>/<first two hex digits of the key>/<key>.<ext>, the extension naming the
// format (the only thing a hit needs besides the bytes); writes go to <dir>/tmp/ and are
// renamed into place, so a reader (or a restart after a crash) never sees half a file.
// The index (key -> size, in recency order) lives in memory, rebuilt on first use from the
// directory, oldest modification time first; hits touch the file's time now and then so the
// order survives restarts. A process's index does not see another process's writes: several
// processes sharing DATA_DIR each keep the directory under their own limit, and a file one
// of them evicted is a miss for the others, nothing worse.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface ImageCacheOptions {
  dir: string;
  /** Total bytes kept; 0 keeps nothing. */
  maxBytes: number;
  /** Called for each entry evicted to make room. */
  onEvict?: () => void;
}

export interface ImageCache {
  /** The entry's bytes and extension, and it becomes the most recently used; undefined on a miss. */
  get(key: string): Promise<{ bytes: Buffer; ext: string } | undefined>;
  /** Stores an entry (atomically) and evicts what no longer fits. Never rejects: a cache that
   * cannot write (a full disk) costs the next request a transform, not an error. */
  put(key: string, ext: string, bytes: Buffer): Promise<boolean>;
  stats(): Promise<{ entries: number; bytes: number; maxBytes: number }>;
}

interface Entry {
  ext: string;
  size: number;
  /** When the file's modification time was last set (written or touched). */
  touchedAt: number;
}

const NAME = /^([0-9a-f]{64})\.([a-z0-9]{1,8})$/;
/** A hit touches its file at most this often: order across restarts needs no finer grain. */
const TOUCH_EVERY_MS = 60_000;

export function createImageCache({ dir, maxBytes, onEvict }: ImageCacheOptions): ImageCache {
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  const index = new Map<string, Entry>();
  let total = 0;
  const tmpDir = path.join(dir, 'tmp');
  const file = (key: string, ext: string) => path.join(dir, key.slice(0, 2), `${key}.${ext}`);
  let loading: Promise<void> | undefined;
  const ready = () => (loading ??= load());

  async function load(): Promise<void> {
    // Leftovers of writes cut short by a crash.
    await fs.promises.rm(tmpDir, { recursive: true, force: true });
    await fs.promises.mkdir(tmpDir, { recursive: true });
    const found: (Entry & { key: string; mtimeMs: number })[] = [];
    for (const shard of await fs.promises.readdir(dir)) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      for (const name of await fs.promises.readdir(path.join(dir, shard)).catch(() => [])) {
        const match = NAME.exec(name);
        if (!match || !match[1]!.startsWith(shard)) continue;
        const stat = await fs.promises.stat(path.join(dir, shard, name)).catch(() => undefined);
        if (stat?.isFile()) found.push({ key: match[1]!, ext: match[2]!, size: stat.size, mtimeMs: stat.mtimeMs, touchedAt: stat.mtimeMs });
      }
    }
    found.sort((a, b) => a.mtimeMs - b.mtimeMs);
    for (const { key, ext, size, touchedAt } of found) {
      index.set(key, { ext, size, touchedAt });
      total += size;
    }
    // The limit may have been lowered since these were written.
    await evict();
  }

  function forget(key: string): void {
    const entry = index.get(key);
    if (!entry) return;
    index.delete(key);
    total -= entry.size;
  }

  async function evict(): Promise<void> {
    const removals: Promise<void>[] = [];
    for (const [key, entry] of index) {
      if (total <= maxBytes) break;
      forget(key);
      onEvict?.();
      removals.push(fs.promises.rm(file(key, entry.ext), { force: true }).catch(() => undefined));
    }
    await Promise.all(removals);
  }

  return {
    async get(key) {
      await ready();
      const entry = index.get(key);
      if (!entry) return undefined;
      index.delete(key);
      index.set(key, entry);
      let bytes: Buffer;
      try {
        bytes = await fs.promises.readFile(file(key, entry.ext));
      } catch {
        // Evicted between the lookup and the read, or removed by hand: a miss.
        if (index.get(key) === entry) forget(key);
        return undefined;
      }
      const now = Date.now();
      if (now - entry.touchedAt > TOUCH_EVERY_MS) {
        entry.touchedAt = now;
        const at = new Date(now);
        void fs.promises.utimes(file(key, entry.ext), at, at).catch(() => undefined);
      }
      return { bytes, ext: entry.ext };
    },

    async put(key, ext, bytes) {
      if (!/^[0-9a-f]{64}$/.test(key) || !/^[a-z0-9]{1,8}$/.test(ext)) throw new Error(`not a cache key and extension: ${key}.${ext}`);
      await ready();
      if (bytes.length > maxBytes) return false;
      const temp = path.join(tmpDir, `${key}.${crypto.randomBytes(6).toString('hex')}`);
      try {
        await fs.promises.writeFile(temp, bytes);
        await fs.promises.mkdir(path.dirname(file(key, ext)), { recursive: true });
        await fs.promises.rename(temp, file(key, ext));
      } catch {
        await fs.promises.rm(temp, { force: true }).catch(() => undefined);
        return false;
      }
      forget(key);
      index.set(key, { ext, size: bytes.length, touchedAt: Date.now() });
      total += bytes.length;
      await evict();
      return true;
    },

    async stats() {
      await ready();
      return { entries: index.size, bytes: total, maxBytes };
    },
  };
}
