// Uploads into the folder on screen: drop files or whole directories, or pick them; each file
// gets a progress bar and a cancel button. Three files go at once; directories become folders.
import { useRef, useState } from 'preact/hooks';
import { ApiError, type FileItem } from '../api';
import { droppedFiles, folderFor, pickedFiles, sendFile, type Picked } from '../upload';
import { Cid, describe, formatBytes } from '../ui';

const AT_ONCE = 3;
/** Attempts of one file while the service answers 429 or 503. */
const RETRIES = 6;

interface Task {
  id: number;
  path: string;
  size: number;
  loaded: number;
  state: 'waiting' | 'uploading' | 'done' | 'failed' | 'cancelled';
  result?: FileItem;
  error?: string;
  cancel?: () => void;
}

let nextId = 1;

export function UploadPanel({ folderId, onUploaded }: { folderId: string | null; onUploaded: () => void }) {
  const [tasks, setTasks] = useState<Task[]>([]);
  const [over, setOver] = useState(false);
  const cancelled = useRef(new Set<number>());
  const update = (id: number, change: Partial<Task>) => setTasks((all) => all.map((t) => (t.id === id ? { ...t, ...change } : t)));

  /** Sends the file again (from disk) while the service asks to wait: a big directory can
   * outrun the plan's request rate (429) or meet a busy moment (503). */
  const sendPatiently = async (file: File, target: string | null, id: number): Promise<FileItem> => {
    for (let attempt = 1; ; attempt++) {
      const sent = sendFile(file, target, (loaded) => update(id, { loaded }));
      update(id, { state: 'uploading', cancel: sent.cancel });
      try {
        return await sent.done;
      } catch (err) {
        const waitS = err instanceof ApiError && (err.status === 429 || err.status === 503) ? (err.retryAfterS ?? 1) : null;
        if (waitS === null || attempt >= RETRIES || cancelled.current.has(id)) throw err;
        update(id, { state: 'waiting', loaded: 0, cancel: undefined });
        await new Promise((resolve) => setTimeout(resolve, Math.min(waitS, 60) * 1000));
        if (cancelled.current.has(id)) throw err;
      }
    }
  };

  const start = async (picked: Picked[]) => {
    const batch = picked.map((p) => ({ ...p, task: { id: nextId++, path: [...p.dirs, p.file.name].join('/'), size: p.file.size } }));
    setTasks((all) => [...all, ...batch.map(({ task }) => ({ ...task, loaded: 0, state: 'waiting' as const }))]);
    const folders = new Map<string, Promise<string | null>>();
    const queue = [...batch];
    const worker = async () => {
      for (let item = queue.shift(); item; item = queue.shift()) {
        const { task, file, dirs } = item;
        if (cancelled.current.has(task.id)) continue;
        try {
          const target = await folderFor(folderId, dirs, folders);
          const result = await sendPatiently(file, target, task.id);
          update(task.id, { state: 'done', loaded: file.size, result, cancel: undefined });
          onUploaded();
        } catch (err) {
          const wasCancelled = cancelled.current.has(task.id);
          update(task.id, {
            state: wasCancelled ? 'cancelled' : 'failed',
            error: wasCancelled ? undefined : describe(err),
            cancel: undefined,
          });
        }
      }
    };
    await Promise.all(Array.from({ length: AT_ONCE }, worker));
  };

  const cancel = (task: Task) => {
    cancelled.current.add(task.id);
    if (task.cancel) task.cancel();
    else update(task.id, { state: 'cancelled' });
  };

  return (
    <div class="uploads">
      <div
        class={over ? 'dropzone over' : 'dropzone'}
        data-testid="dropzone"
        onDragOver={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={async (e) => {
          e.preventDefault();
          setOver(false);
          if (e.dataTransfer) void start(await droppedFiles(e.dataTransfer.items));
        }}
      >
        <p>Drop files or folders here, or</p>
        <label class="button">
          Choose files
          <input
            type="file"
            multiple
            class="visually-hidden"
            onChange={(e) => {
              const input = e.currentTarget;
              if (input.files) void start(pickedFiles(input.files));
              input.value = '';
            }}
          />
        </label>
        <label class="button">
          Choose a folder
          <input
            type="file"
            class="visually-hidden"
            ref={(el) => el?.setAttribute('webkitdirectory', '')}
            onChange={(e) => {
              const input = e.currentTarget;
              if (input.files) void start(pickedFiles(input.files));
              input.value = '';
            }}
          />
        </label>
      </div>
      {tasks.length > 0 && (
        <ul class="tasks" aria-label="Uploads">
          {tasks.map((t) => (
            <li key={t.id} data-state={t.state}>
              <span class="name">{t.path}</span>
              <progress max={t.size || 1} value={t.state === 'done' ? t.size || 1 : t.loaded} aria-label={`Upload of ${t.path}`} />
              <span class="percent">{t.state === 'done' ? '100 %' : `${t.size ? Math.floor((100 * t.loaded) / t.size) : 0} %`}</span>
              <span class="state">{t.state}</span>
              {t.result && <Cid cid={t.result.cid} />}
              {t.error && <span class="error">{t.error}</span>}
              {(t.state === 'waiting' || t.state === 'uploading') && (
                <button type="button" class="small" aria-label={`Cancel ${t.path}`} onClick={() => cancel(t)}>
                  Cancel
                </button>
              )}
              <span class="size">{formatBytes(t.size)}</span>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
