// The build id a worker announces to Temporal's Worker Deployment Versioning
// (workers/versioning.ts): the package version and the commit, so two checkouts of one version
// are still told apart. Production images pass it as WORKER_BUILD_ID (deploy/Dockerfile's
// BUILD_ID), having no .git to read.
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from './paths.js';

/** The checked-out commit, from .git itself (no git process): HEAD, a loose ref or packed-refs. */
export function gitCommit(root = projectRoot): string | undefined {
  try {
    const head = fs.readFileSync(path.join(root, '.git', 'HEAD'), 'utf8').trim();
    if (!head.startsWith('ref: ')) return head;
    const ref = head.slice(5);
    const loose = path.join(root, '.git', ref);
    if (fs.existsSync(loose)) return fs.readFileSync(loose, 'utf8').trim();
    const packed = fs.readFileSync(path.join(root, '.git', 'packed-refs'), 'utf8');
    return packed
      .split('\n')
      .find((line) => line.endsWith(` ${ref}`))
      ?.split(' ')[0];
  } catch {
    // A worktree's .git is a file, an image has none: no commit.
    return undefined;
  }
}

/** `<version>+<12 hex of the commit>`, or the version alone without a commit to read. */
export function defaultBuildId(root = projectRoot): string {
  const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  const commit = gitCommit(root);
  return commit ? `${version}+${commit.slice(0, 12)}` : version;
}
