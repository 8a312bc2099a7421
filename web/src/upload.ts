// Uploads from the browser: each file is one multipart POST /upload/new sent with
// XMLHttpRequest, because fetch() reports no upload progress. The browser streams a File from
// disk as it sends it, so a large file never sits in the page's memory.
import { api, ApiError, refused, storedKey, toApiError, type FileItem, type Folder, type Page } from './api';

export interface Sent {
  done: Promise<FileItem>;
  cancel: () => void;
}

export function sendFile(file: File, folderId: string | null, onProgress: (loaded: number, total: number) => void): Sent {
  const xhr = new XMLHttpRequest();
  const done = new Promise<FileItem>((resolve, reject) => {
    const form = new FormData();
    // Fields before the file part: the API reads them as it streams the file.
    if (folderId) form.append('folderId', folderId);
    form.append('file', file, file.name);
    xhr.open('POST', '/upload/new');
    xhr.setRequestHeader('X-Api-Key', storedKey() ?? '');
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onload = () => {
      if (xhr.status === 201) return resolve(JSON.parse(xhr.responseText) as FileItem);
      const err = toApiError(xhr.status, xhr.responseText, xhr.getResponseHeader('Retry-After'));
      refused(err);
      reject(err);
    };
    xhr.onerror = () => reject(new ApiError(0, 'NETWORK_ERROR', 'the upload was interrupted; retry it'));
    xhr.onabort = () => reject(new ApiError(0, 'CANCELLED', 'cancelled'));
    xhr.send(form);
  });
  return { done, cancel: () => xhr.abort() };
}

/** A file and where it goes below the folder it was dropped on (`a/b` for `a/b/c.txt`). */
export interface Picked {
  file: File;
  dirs: string[];
}

/** The files of a drop, directories walked (the entries API is the only way to read them). */
export async function droppedFiles(items: DataTransferItemList): Promise<Picked[]> {
  // Read synchronously, in the drop event: the items are emptied once it returns. A file that
  // has no entry (one a page made) is taken as it is.
  const dropped = [...items]
    .filter((item) => item.kind === 'file')
    .map((item) => ({ entry: item.webkitGetAsEntry?.(), file: item.getAsFile() }));
  const out: Picked[] = [];
  const walk = async (entry: FileSystemEntry, dirs: string[]): Promise<void> => {
    if (entry.isFile) {
      const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
      out.push({ file, dirs });
      return;
    }
    const reader = (entry as FileSystemDirectoryEntry).createReader();
    // readEntries answers a batch at a time, and an empty batch at the end.
    for (;;) {
      const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
      if (batch.length === 0) break;
      for (const child of batch) await walk(child, [...dirs, entry.name]);
    }
  };
  for (const { entry, file } of dropped) {
    if (entry) await walk(entry, []);
    else if (file) out.push({ file, dirs: [] });
  }
  return out;
}

/** The files of an <input type="file">, with a picked directory's structure kept. */
export const pickedFiles = (files: FileList): Picked[] =>
  [...files].map((file) => ({ file, dirs: (file.webkitRelativePath || file.name).split('/').slice(0, -1) }));

/**
 * The folder for `dirs` below `parentId`, created where missing. A folder that exists already
 * (409) is found among its parent's children. `known` remembers what a batch resolved.
 */
export async function folderFor(
  parentId: string | null,
  dirs: string[],
  known: Map<string, Promise<string | null>>,
): Promise<string | null> {
  if (dirs.length === 0) return parentId;
  const key = JSON.stringify([parentId, ...dirs]);
  let found = known.get(key);
  if (!found) {
    found = (async () => {
      const parent = await folderFor(parentId, dirs.slice(0, -1), known);
      const name = dirs.at(-1)!;
      try {
        const created = await api<Folder>('POST', '/folders', { body: { name, parentFolderId: parent } });
        return created.folderId;
      } catch (err) {
        if (!(err instanceof ApiError) || err.status !== 409) throw err;
        return findChild(parent, name);
      }
    })();
    known.set(key, found);
  }
  return found;
}

async function findChild(parentId: string | null, name: string): Promise<string> {
  let cursor: string | null = null;
  do {
    const page: Page<Folder> = await api('GET', '/folders', { query: { parentFolderId: parentId ?? 'root', cursor, limit: 100 } });
    const hit = page.items.find((f) => f.name === name);
    if (hit) return hit.folderId;
    cursor = page.nextCursor;
  } while (cursor);
  throw new ApiError(409, 'CONFLICT', `a folder named ${name} could not be created or found`);
}
