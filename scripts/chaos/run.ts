// `npm run chaos [-- --temporal cluster]`: the chaos run (load.ts) against a stack of its own.
// With the dev server (the default) each engine in turn is killed with SIGKILL and started
// again: FerretDB, the Temporal server, Kubo, the Cluster peer, the worker, the API. With
// `--temporal cluster`, Temporal is the production shape and the faults are its pieces: a
// history service, a matching service, the frontend, the worker service (SIGKILL) and
// PostgreSQL (pg_ctl stop -m immediate), each started again by the stack. Printed per fault:
// requests during it, how they were answered (503s, with Retry-After or not; 500s; no answer;
// hangs), and the time from the fault until /readyz answered 200 again. Exit 0 only when
// nothing was lost, nothing answered 500 or hung, and the audit is clean.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startChaosStack } from './engines.js';
import { runChaos } from './load.js';

const say = (line: string) => process.stderr.write(`[chaos] ${line}\n`);

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { temporal: { type: 'string', default: 'dev' } } });
  if (values.temporal !== 'dev' && values.temporal !== 'cluster') throw new Error('--temporal must be dev or cluster');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'stupa-chaos-'));
  say(`stack in ${dataDir} (Temporal: ${values.temporal})`);
  const stack = await startChaosStack(dataDir, { temporal: values.temporal });
  let code = 1;
  try {
    const report = await runChaos(stack, say);
    console.table(report.rows);
    console.log(report.summary);
    console.log(`slowest answers: ${report.slowest}`);
    for (const line of report.wrong) console.log(line);
    console.log(
      report.healed.length === 0 ? 'the audit found nothing' : `the audit found ${report.healed.length}:\n  ${report.healed.join('\n  ')}`,
    );
    console.log(
      report.problems.length === 0
        ? 'lost: nothing; after --repair the audit finds nothing'
        : `problems:\n  ${report.problems.join('\n  ')}`,
    );
    code = report.problems.length === 0 && report.wrong.length === 0 && report.healed.length === 0 ? 0 : 1;
    return code;
  } finally {
    await stack.stop();
    // Kept when something was wrong: the engines' logs are in <dir>/logs.
    if (code === 0) fs.rmSync(dataDir, { recursive: true, force: true });
    else say(`kept ${dataDir} (logs in ${path.join(dataDir, 'logs')})`);
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    say(err.stack ?? err.message);
    process.exit(1);
  },
);
