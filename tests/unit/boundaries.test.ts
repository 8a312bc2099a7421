// The layers' import boundaries are lint rules (eslint.config.js). This runs ESLint with the
// project's own configuration, as `npm run lint` does, on imports that cross each boundary
// (each must be refused) and on the imports each layer is allowed (each must pass).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/** ESLint in a plain Node process (its config loading needs no jest), one answer per case. */
async function restrictedImports(cases: { file: string; code: string }[]): Promise<string[][]> {
  const script = `
    import { ESLint } from 'eslint';
    const cases = JSON.parse(process.argv[1]);
    const eslint = new ESLint({ cwd: process.cwd() });
    const out = [];
    for (const c of cases) {
      const [result] = await eslint.lintText(c.code, { filePath: c.file });
      out.push(result.messages.filter((m) => m.ruleId === 'no-restricted-imports' || m.fatal).map((m) => m.message));
    }
    process.stdout.write(JSON.stringify(out));`;
  const { stdout } = await exec(process.execPath, ['--input-type=module', '-e', script, JSON.stringify(cases)], {
    cwd: process.cwd(),
    maxBuffer: 10 * 1024 * 1024,
  });
  return JSON.parse(stdout);
}

const refused: [string, string][] = [
  ['workflows/new.ts', `import { Client } from '@temporalio/client';`],
  ['workflows/new.ts', `import fs from 'node:fs';`],
  ['workflows/new.ts', `import { createKubo } from '../infra/ipfs/kubo.js';`],
  ['workflows/new.ts', `import { createActivities } from '../activities/index.js';`],
  ['workflows/new.ts', `import { openDatabase } from '../infra/db/index.js';`],
  ['workflows/new.ts', `import { requestPin } from '../core/pins.js';`],
  ['infra/temporal/contracts/new.ts', `import { Client } from '@temporalio/client';`],
  ['infra/temporal/contracts/new.ts', `import { pinJobInput } from '../../db/pins.js';`],
  ['infra/new.ts', `import { NotFound } from '../core/errors.js';`],
  ['infra/new.ts', `import { restPin } from '../api/rest/pins.js';`],
  ['infra/ipfs/new.ts', `import { EDGE_SECRET_HEADER } from '../../edge/protocol.js';`],
  ['infra/db/new.ts', `import { pinWorkflow } from '../../workflows/pins.js';`],
  ['infra/new.ts', `import { createActivities } from '../activities/index.js';`],
  ['infra/new.ts', `import { startStack } from '../stack/stack.js';`],
  ['edge/new.ts', `import { servesHostName } from '../core/edge.js';`],
  ['edge/new.ts', `import { edgeDecision } from '../api/edge.js';`],
  ['edge/new.ts', `import { startStack } from '../stack/stack.js';`],
  ['core/new.ts', `import express from 'express';`],
  ['core/new.ts', `import { restPin } from '../api/rest/pins.js';`],
  ['core/s3/new.ts', `import { S3Error } from '../../api/s3/errors.js';`],
  ['core/new.ts', `import { createActivities } from '../activities/index.js';`],
  ['core/new.ts', `import { pinWorkflow } from '../workflows/pins.js';`],
  ['core/new.ts', `import { startStack } from '../stack/stack.js';`],
  ['activities/new.ts', `import { webhookBody } from '../api/webhooks/payload.js';`],
  ['activities/new.ts', `import { startStack } from '../stack/stack.js';`],
  ['workers/new.ts', `import { restPin } from '../api/rest/pins.js';`],
  ['api/rest/new.ts', `import { startStack } from '../../stack/stack.js';`],
  ['api/rest/new.ts', `import { createActivities } from '../../activities/index.js';`],
  ['api/rest/new.ts', `import { pinWorkflow } from '../../workflows/pins.js';`],
];

const allowed: [string, string][] = [
  ['workflows/new.ts', `import { proxyActivities } from '@temporalio/workflow';`],
  ['workflows/new.ts', `import type { Activities } from '../activities/index.js';`],
  ['workflows/new.ts', `import { pinWait } from '../infra/temporal/contracts/pins.js';`],
  ['workflows/index2.ts', `export { pinWorkflow } from './pins.js';`],
  ['infra/temporal/contracts/new.ts', `import type { JobContract } from './job.js';`],
  ['infra/new.ts', `import { pinJob } from './temporal/contracts/pins.js';`],
  ['edge/new.ts', `import { loadConfig } from '../infra/config.js';`],
  ['core/new.ts', `import { pinJob } from '../infra/temporal/contracts/pins.js';`],
  ['core/new.ts', `import type { EdgeAnswers } from '../edge/purge.js';`],
  ['activities/new.ts', `import { webhookBody } from '../core/webhook-payload.js';`],
  ['api/rest/new.ts', `import { requestPin } from '../../core/pins.js';`],
  ['api/rest/new.ts', `import { EDGE_SECRET_HEADER } from '../../edge/protocol.js';`],
  ['stack/new.ts', `import { SEARCH_ATTRIBUTES } from '../infra/temporal/contracts/job.js';`],
  ['stack/new.ts', `import { edgeCaddyfile } from '../edge/caddyfile.js';`],
];

test('every import across a layer boundary is refused by the lint rules, and allowed imports pass', async () => {
  const cases = [...refused, ...allowed].map(([file, code]) => ({ file, code: `${code}\nexport {};\n` }));
  const results = await restrictedImports(cases);
  refused.forEach(([file, code], i) => {
    expect({ file, code, refused: results[i]!.length > 0 }).toEqual({ file, code, refused: true });
  });
  allowed.forEach(([file, code], i) => {
    expect({ file, code, messages: results[refused.length + i] }).toEqual({ file, code, messages: [] });
  });
}, 60_000);

/** dpdm's circles among `patterns` (relative to `cwd`), type-only imports included. */
async function importCircles(cwd: string, patterns: string[]): Promise<string[]> {
  const bin = path.join(process.cwd(), 'node_modules', '.bin', 'dpdm');
  const { stdout } = await exec(bin, ['--no-warning', '--no-tree', '--no-progress', ...patterns], { cwd, maxBuffer: 10 * 1024 * 1024 });
  return [...stdout.matchAll(/^\s*\d+\) (.+)$/gm)].map((m) => m[1]!);
}

// A module that imports one that imports it back (even for a type) makes the order of
// evaluation matter and the two one piece: the house rule is none.
test('no module imports one that imports it back', async () => {
  // The check itself sees a circle: two modules that import each other (one by type only).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-circle-'));
  fs.writeFileSync(path.join(dir, 'a.ts'), `import { b } from './b.js';\nexport const a = () => b;\nexport type A = string;\n`);
  fs.writeFileSync(path.join(dir, 'b.ts'), `import type { A } from './a.js';\nexport const b: A = 'b';\n`);
  // The `.js` of an import names a `.ts` file under NodeNext resolution, which dpdm reads from tsconfig.json.
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext' } }),
  );
  expect(await importCircles(dir, ['*.ts'])).toEqual([expect.stringMatching(/^(a\.ts -> b\.ts|b\.ts -> a\.ts)$/)]);

  const layers = ['api', 'core', 'activities', 'workers', 'workflows', 'infra', 'edge', 'stack', 'scripts', 'tests'].map(
    (dir) => `${dir}/**/*.ts`,
  );
  expect(await importCircles(process.cwd(), layers)).toEqual([]);
}, 60_000);
