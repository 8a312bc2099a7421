// The build id a worker announces to Temporal's Worker Deployment Versioning
// (workers/versioning.ts): the package version and the commit, so two checkouts of one version
// are still told apart. Production images pass it as WORKER_BUILD_ID (deploy/Dockerfile's
// BUILD_ID), having no .git to read.
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from './paths.js';

/** The checked-out commit, from .git itself (no git process): HEAD, then a loose ref or
 * packed-refs. In a worktree .git is a file naming its own git directory, whose refs live in the
 * main one (`commondir`). */
export function gitCommit(root = projectRoot): string | undefined {
  try {
    let gitDir = path.join(root, '.git');
    if (fs.statSync(gitDir).isFile())
      gitDir = path.resolve(
        root,
        fs
          .readFileSync(gitDir, 'utf8')
          .replace(/^gitdir:\s*/, '')
          .trim(),
      );
    const common = fs.existsSync(path.join(gitDir, 'commondir'))
      ? path.resolve(gitDir, fs.readFileSync(path.join(gitDir, 'commondir'), 'utf8').trim())
      : gitDir;
    const head = fs.readFileSync(path.join(gitDir, 'HEAD'), 'utf8').trim();
    if (!head.startsWith('ref: ')) return head;
    const ref = head.slice(5);
    for (const dir of [gitDir, common]) if (fs.existsSync(path.join(dir, ref))) return fs.readFileSync(path.join(dir, ref), 'utf8').trim();
    const packed = fs.readFileSync(path.join(common, 'packed-refs'), 'utf8');
    return packed
      .split('\n')
      .find((line) => line.endsWith(` ${ref}`))
      ?.split(' ')[0];
  } catch {
    // An image has no .git: no commit.
    return undefined;
  }
}

/** `<version>+<12 hex of the commit>`, or the version alone without a commit to read. */
export function defaultBuildId(root = projectRoot): string {
  const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  const commit = gitCommit(root);
  return commit ? `${version}+${commit.slice(0, 12)}` : version;
}
