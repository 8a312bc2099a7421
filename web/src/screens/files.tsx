// Files and folders: browse a folder (its path, subfolders and files a page at a time),
// create, rename, move and delete, upload into it, and snapshot it.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, withQuery, type FileItem, type Folder, type Page } from '../api';
import { link, type ScreenProps } from '../route';
import { Cid, DeleteButton, ErrorNote, formatBytes, formatTime, MoreButton, Section, useAction, usePaged } from '../ui';
import { SnapshotsPanel } from './snapshots';
import { UploadPanel } from './upload-panel';

/** The folders from the top down to `folderId`. */
function usePath(folderId: string | null): Folder[] {
  const [path, setPath] = useState<Folder[]>([]);
  useEffect(() => {
    let stale = false;
    (async () => {
      const chain: Folder[] = [];
      for (let id = folderId; id;) {
        const folder: Folder = await api('GET', `/folders/${encodeURIComponent(id)}`);
        chain.unshift(folder);
        id = folder.parentFolderId;
      }
      if (!stale) setPath(chain);
    })().catch(() => setPath([]));
    return () => {
      stale = true;
    };
  }, [folderId]);
  return path;
}

/** Rename and move, shared by files and folders: a name field and a destination folder id. */
function EditRow({
  label,
  name,
  onSave,
}: {
  label: string;
  name: string;
  onSave: (name: string, dest: string | undefined) => Promise<unknown>;
}) {
  const [open, setOpen] = useState(false);
  const [value, setValue] = useState(name);
  const [dest, setDest] = useState('');
  const [run, error, busy] = useAction();
  if (!open)
    return (
      <button type="button" class="small" aria-label={`Rename or move ${label}`} onClick={() => setOpen(true)}>
        Rename or move
      </button>
    );
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        void run(async () => {
          await onSave(value.trim(), dest.trim() || undefined);
          setOpen(false);
        });
      }}
    >
      <label>
        Name <input value={value} onInput={(e) => setValue(e.currentTarget.value)} required />
      </label>
      <label>
        Move to folder id (<code>root</code>: top level) <input value={dest} onInput={(e) => setDest(e.currentTarget.value)} />
      </label>
      <button type="submit" class="small" disabled={busy}>
        Save
      </button>
      <button type="button" class="small" onClick={() => setOpen(false)}>
        Close
      </button>
      <ErrorNote error={error} />
    </form>
  );
}

const destination = (dest: string | undefined) => (dest === 'root' ? null : dest);

export function FilesScreen({ route, refreshProfile }: ScreenProps) {
  const folderId = route.params.get('folder');
  const path = usePath(folderId);
  const [newFolder, setNewFolder] = useState('');
  const [run, error, busy] = useAction();

  const folders = usePaged<Folder>(
    (cursor) => api<Page<Folder>>('GET', '/folders', { query: { parentFolderId: folderId ?? 'root', cursor, limit: 50 } }),
    [folderId],
  );
  const files = usePaged<FileItem>(
    (cursor) => api<Page<FileItem>>('GET', '/upload/list', { query: { folderId: folderId ?? 'root', cursor, limit: 50 } }),
    [folderId],
  );
  const changed = () => {
    void folders.reload();
    void files.reload();
    refreshProfile();
  };
  // Uploads finish one after another: the lists are read again at most once a second.
  const pending = useRef<ReturnType<typeof setTimeout> | null>(null);
  const uploaded = () => {
    pending.current ??= setTimeout(() => {
      pending.current = null;
      changed();
    }, 1000);
  };
  useEffect(() => () => clearTimeout(pending.current ?? undefined), []);

  return (
    <>
      <nav aria-label="Folder path" class="crumbs">
        <a href={link('files')}>All files</a>
        {path.map((f) => (
          <span key={f.folderId}>
            {' / '}
            <a href={link('files', { folder: f.folderId })} aria-current={f.folderId === folderId ? 'location' : undefined}>
              {f.name}
            </a>
          </span>
        ))}
        {folderId && (
          <span class="muted">
            {' '}
            (folder id <code>{folderId}</code>)
          </span>
        )}
      </nav>

      <Section title="Upload">
        <UploadPanel folderId={folderId} onUploaded={uploaded} />
      </Section>

      <Section title="Folders">
        <form
          class="inline"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              await api('POST', '/folders', { body: { name: newFolder.trim(), parentFolderId: folderId } });
              setNewFolder('');
              changed();
            });
          }}
        >
          <label>
            New folder <input value={newFolder} onInput={(e) => setNewFolder(e.currentTarget.value)} required />
          </label>
          <button type="submit" disabled={busy}>
            Create folder
          </button>
        </form>
        <ErrorNote error={error} />
        <ErrorNote error={folders.error} />
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Files</th>
              <th scope="col">Latest snapshot</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {folders.items.map((f) => (
              <tr key={f.folderId}>
                <td>
                  <a href={link('files', { folder: f.folderId })}>{f.name}</a>
                </td>
                <td>{f.fileCount}</td>
                <td>{f.latestSnapshot ? <Cid cid={f.latestSnapshot.cid} /> : '—'}</td>
                <td class="actions">
                  <EditRow
                    label={f.name}
                    name={f.name}
                    onSave={async (name, dest) => {
                      const body: Record<string, unknown> = { name };
                      if (dest !== undefined) body.parentFolderId = destination(dest);
                      await api('PUT', `/folders/${f.folderId}`, { body });
                      changed();
                    }}
                  />
                  <DeleteButton
                    label={`folder ${f.name}`}
                    onConfirm={() =>
                      void run(async () => (await api('DELETE', withQuery(`/folders/${f.folderId}`, { recursive: true })), changed()))
                    }
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {!folders.loading && folders.items.length === 0 && <p class="muted">No folders here.</p>}
        <MoreButton more={folders.more} loading={folders.loading} />
      </Section>

      <Section title="Files">
        <ErrorNote error={files.error} />
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">CID</th>
              <th scope="col">Size</th>
              <th scope="col">Type</th>
              <th scope="col">Uploaded</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {files.items.map((f) => (
              <tr key={f.id} data-cid={f.cid}>
                <td>{f.name}</td>
                <td>
                  <Cid cid={f.cid} />
                </td>
                <td>{formatBytes(f.size)}</td>
                <td>{f.mimeType}</td>
                <td>{formatTime(f.createdAt)}</td>
                <td class="actions">
                  <EditRow
                    label={f.name}
                    name={f.name}
                    onSave={async (name, dest) => {
                      if (name !== f.name) await api('PUT', `/files/${f.id}/name`, { body: { name } });
                      if (dest !== undefined) await api('PUT', `/files/${f.id}/move`, { body: { folderId: destination(dest) } });
                      changed();
                    }}
                  />
                  <DeleteButton
                    label={`file ${f.name}`}
                    onConfirm={() => void run(async () => (await api('DELETE', `/files/${f.id}`), changed()))}
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {!files.loading && files.items.length === 0 && <p class="muted">No files here.</p>}
        <MoreButton more={files.more} loading={files.loading} />
      </Section>

      {folderId && <SnapshotsPanel folderId={folderId} />}
    </>
  );
}
