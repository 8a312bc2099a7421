// A folder's snapshots: take one (the folder as a UnixFS directory, pinned), follow the job's
// progress until it completes, and list or delete the snapshots taken.
import { useEffect, useState } from 'preact/hooks';
import { api, type Page, type Snapshot, type SnapshotJob } from '../api';
import { Cid, DeleteButton, ErrorNote, formatBytes, formatTime, MoreButton, Section, useAction, usePaged, usePolling } from '../ui';

export function SnapshotsPanel({ folderId }: { folderId: string }) {
  const [job, setJob] = useState<SnapshotJob | null>(null);
  const [run, error, busy] = useAction();
  const list = usePaged<Snapshot>(
    (cursor) => api<Page<Snapshot>>('GET', `/folders/${folderId}/snapshots`, { query: { cursor, limit: 20 } }),
    [folderId],
  );

  // A job started earlier (or elsewhere) shows when the folder opens.
  useEffect(() => {
    api<SnapshotJob>('GET', `/folders/${folderId}/snapshot`).then(setJob, () => setJob(null));
  }, [folderId]);

  // While a job runs, its state is read every second; the list again once it completes.
  usePolling(
    job?.status === 'running',
    () => api<SnapshotJob>('GET', `/folders/${folderId}/snapshot`),
    (state) => {
      setJob(state);
      if (state.status === 'complete') void list.reload();
      return state.status === 'running';
    },
    [folderId],
  );

  const progress = job?.progress;
  return (
    <Section title="Snapshots">
      <p>
        <button
          type="button"
          disabled={busy || job?.status === 'running'}
          onClick={() =>
            void run(async () => {
              const started = await api<SnapshotJob>('POST', `/folders/${folderId}/snapshot`);
              setJob(started);
              if (started.status === 'complete') void list.reload();
            })
          }
        >
          Take a snapshot
        </button>
      </p>
      <ErrorNote error={error} />
      {job && job.status !== 'none' && (
        <div class="job" role="status">
          {job.status === 'running' ? 'Snapshot running' : 'Snapshot complete'}
          {progress && (
            <>
              {' '}
              <progress max={progress.total || 1} value={progress.linked} aria-label="Files linked into the snapshot" /> {progress.linked}{' '}
              of {progress.total} files
            </>
          )}
          {job.snapshot && (
            <>
              {': '}
              <Cid cid={job.snapshot.cid} />
            </>
          )}
        </div>
      )}
      <ErrorNote error={list.error} />
      <table>
        <thead>
          <tr>
            <th scope="col">CID</th>
            <th scope="col">Taken</th>
            <th scope="col">Files</th>
            <th scope="col">Size</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {list.items.map((s) => (
            <tr key={s.cid} data-cid={s.cid}>
              <td>
                <Cid cid={s.cid} />
              </td>
              <td>{formatTime(s.takenAt)}</td>
              <td>{s.fileCount}</td>
              <td>{formatBytes(s.totalSize)}</td>
              <td>
                <DeleteButton
                  label={`snapshot ${s.cid}`}
                  onConfirm={() => void run(async () => (await api('DELETE', `/folders/${folderId}/snapshots/${s.cid}`), list.reload()))}
                />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {!list.loading && list.items.length === 0 && <p class="muted">No snapshots yet.</p>}
      <MoreButton more={list.more} loading={list.loading} />
    </Section>
  );
}
