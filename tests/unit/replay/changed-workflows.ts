// A deliberately non-deterministic edit of workflows/pins.ts, for tests/unit/replay.test.ts to
// show that the replay notices one: the first step is a timer where the recorded history has the
// local activity `beginPin`.
import { sleep } from '@temporalio/workflow';

export async function pinWorkflow(): Promise<string> {
  await sleep('1s');
  return 'pinned';
}
