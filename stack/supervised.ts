// How stack/start.ts runs the API and the worker:
//   node --import tsx stack/supervised.ts <entry.ts> [arguments...]
// They run in process groups of their own, so that a Ctrl-C or a SIGTERM to npm's group
// reaches only the supervisor, which then stops each of them once and in order. The price:
// nothing else stops them when the supervisor dies without doing so (SIGKILL, the OOM
// killer). So the supervisor gives each an IPC channel that carries nothing; the kernel
// closes it when the supervisor's process ends, however it ends, and this process then sends
// itself the SIGTERM the supervisor would have sent: its usual graceful stop runs.
// A wrapper that imports the entry rather than a second --import: node's execArgv reaches the
// worker's threads, and a .ts file there fails to load (measured: "Unknown file extension").
import path from 'node:path';
import { pathToFileURL } from 'node:url';

if (process.channel) {
  // The channel alone must not keep the process alive (the worker ends when its work ends).
  process.channel.unref();
  process.once('disconnect', () => {
    process.kill(process.pid, 'SIGTERM');
    // A stop that hangs still ends (the worker's own bound is 20 s: workers/worker.ts);
    // unref'd, so it never keeps a finished process alive.
    setTimeout(() => process.exit(1), 30_000).unref();
  });
}

const entry = process.argv[2];
if (!entry) throw new Error('usage: node --import tsx stack/supervised.ts <entry.ts> [arguments...]');
// The entry sees the command line it would have had without this wrapper.
process.argv.splice(1, 1);
await import(pathToFileURL(path.resolve(entry)).href);
