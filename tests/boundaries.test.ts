// The layers' import boundaries are lint rules (eslint.config.js). This runs ESLint with the
// project's own configuration, as `npm run lint` does, on imports that cross each boundary
// (each must be refused) and on the imports each layer is allowed (each must pass).
import { execFile } from 'node:child_process';
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
  ['workflows/new.ts', `import { createKubo } from '../infra/kubo.js';`],
  ['workflows/new.ts', `import { createActivities } from '../activities/index.js';`],
  ['workflows/new.ts', `import { openDatabase } from '../infra/db/index.js';`],
  ['infra/temporal/contracts/new.ts', `import { Client } from '@temporalio/client';`],
  ['infra/temporal/contracts/new.ts', `import { pinJobInput } from '../../db/pins.js';`],
  ['infra/new.ts', `import { NotFound } from '../api/usecases/errors.js';`],
  ['infra/db/new.ts', `import { pinWorkflow } from '../../workflows/pins.js';`],
  ['infra/new.ts', `import { createActivities } from '../activities/index.js';`],
  ['infra/new.ts', `import { startStack } from './stack/stack.js';`],
  ['api/usecases/new.ts', `import express from 'express';`],
  ['api/usecases/new.ts', `import { restPin } from '../rest/pins.js';`],
  ['api/rest/new.ts', `import { startStack } from '../../infra/stack/stack.js';`],
  ['activities/new.ts', `import { startStack } from '../infra/stack/stack.js';`],
];

const allowed: [string, string][] = [
  ['workflows/new.ts', `import { proxyActivities } from '@temporalio/workflow';`],
  ['workflows/new.ts', `import type { Activities } from '../activities/index.js';`],
  ['workflows/new.ts', `import { pinWait } from '../infra/temporal/contracts/pins.js';`],
  ['workflows/index2.ts', `export { pinWorkflow } from './pins.js';`],
  ['infra/temporal/contracts/new.ts', `import type { JobContract } from './job.js';`],
  ['infra/new.ts', `import { pinJob } from './temporal/contracts/pins.js';`],
  ['api/usecases/new.ts', `import { pinJob } from '../../infra/temporal/contracts/pins.js';`],
  ['api/rest/new.ts', `import { requestPin } from '../usecases/pins.js';`],
  ['infra/stack/new.ts', `import { SEARCH_ATTRIBUTES } from '../temporal/contracts/job.js';`],
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
