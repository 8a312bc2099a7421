// Every recorded history (tests/histories/<workflowType>/*.json, written by `npm run
// record-histories` from real runs) replayed against today's workflow code with the SDK's
// replayer: a change to a workflow that is not deterministic against what running workflows have
// already recorded fails here, naming the history and the event. How to change a workflow
// safely: docs/architecture/workflows.md, "Changing a workflow".
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const historiesDir = path.join(root, 'tests', 'histories');
const workflowsPath = path.join(root, 'workflows', 'index.ts');

// Quiet: the bundle's listing and the replays' own logs would bury jest's report; what failed is
// in each result. (Core's warning for the deliberate failure below is expected.)
Runtime.install({ logger: new DefaultLogger('ERROR'), telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } } });

/** The workflow functions the worker registers, by name (workflows/index.ts). */
const registered = [...fs.readFileSync(workflowsPath, 'utf8').matchAll(/export \{([^}]+)\}/g)].flatMap((m) =>
  m[1]!.split(',').map((name) => name.trim()),
);

interface Recorded {
  file: string;
  workflowId: string;
  history: ReturnType<typeof historyFromJSON>;
}

function recorded(type?: string): Recorded[] {
  const types = type ? [type] : fs.readdirSync(historiesDir);
  return types.flatMap((t) =>
    fs
      .readdirSync(path.join(historiesDir, t))
      .filter((f) => f.endsWith('.json'))
      .map((f) => {
        const file = path.join(t, f);
        const json = JSON.parse(fs.readFileSync(path.join(historiesDir, file), 'utf8')) as { workflowId: string; history: unknown };
        return { file, workflowId: json.workflowId, history: historyFromJSON(json.history) };
      }),
  );
}

/** Replays `histories` against the workflows at `path`; what failed, as `file: workflowId: error`. */
async function replay(histories: Recorded[], workflows: string): Promise<string[]> {
  const byId = new Map(histories.map((h) => [h.workflowId, h.file]));
  const failures: string[] = [];
  const results = Worker.runReplayHistories(
    { workflowsPath: workflows, replayName: 'stupa-replay' },
    histories.map(({ workflowId, history }) => ({ workflowId, history })),
  );
  for await (const result of results) {
    if (result.error) failures.push(`${byId.get(result.workflowId)}: ${result.workflowId}: ${result.error.message}`);
  }
  return failures;
}

test('every workflow the worker registers has recorded histories', () => {
  expect(registered.length).toBeGreaterThan(5);
  const missing = registered.filter((type) => !fs.existsSync(path.join(historiesDir, type)) || recorded(type).length === 0);
  expect(missing).toEqual([]);
});

test("every recorded history replays against today's workflow code", async () => {
  const histories = recorded();
  expect(histories.length).toBeGreaterThanOrEqual(registered.length);
  expect(await replay(histories, workflowsPath)).toEqual([]);
}, 180_000);

test('a change that is not deterministic fails the replay, naming the history', async () => {
  const pins = recorded('pinWorkflow');
  const failures = await replay(pins, path.join(root, 'tests', 'unit', 'replay', 'changed-workflows.ts'));
  expect(failures).toHaveLength(pins.length);
  for (const failure of failures) expect(failure).toMatch(/^pinWorkflow\/.+\.json: pin:.+: .*[Nn]ondeterminism/);
}, 120_000);
