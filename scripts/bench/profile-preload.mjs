// Profiles the process it is preloaded into (`NODE_OPTIONS=--import ./scripts/bench/profile-preload.mjs`,
// which, unlike --cpu-prof, NODE_OPTIONS allows): a V8 CPU profile from start to exit, written to
// BENCH_PROFILE_DIR/<pid>.cpuprofile (open it in Chrome DevTools or speedscope).
import fs from 'node:fs';
import inspector from 'node:inspector';
import path from 'node:path';

const dir = process.env.BENCH_PROFILE_DIR ?? '.';
const session = new inspector.Session();
session.connect();
session.post('Profiler.enable');
session.post('Profiler.setSamplingInterval', { interval: 500 });
session.post('Profiler.start');
process.on('exit', () => {
  // An in-thread session answers synchronously, so this completes inside the exit handler.
  session.post('Profiler.stop', (err, result) => {
    if (err) return;
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, `${process.pid}.cpuprofile`), JSON.stringify(result.profile));
  });
});
