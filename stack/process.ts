// A child process of the local stack: its output appended to <logDir>/<name>.log, stopped
// with SIGTERM (SIGKILL after a grace period), and health waits that show the log's tail
// when the piece does not come up, because "timed out" alone never says why.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface ManagedProcess {
  name: string;
  pid: number;
  logFile: string;
  /** True until the process has exited. */
  running(): boolean;
  /**
   * Polls `check` until it resolves and returns its value. Throws, with the last lines of
   * the log, on timeout, when the process exits first, or when `signal` aborts.
   */
  waitFor<T>(check: () => Promise<T>, options: { timeoutMs: number; what: string; signal?: AbortSignal }): Promise<T>;
  /** SIGTERM, SIGKILL after `graceMs`; resolves once the process has exited. Never throws. */
  stop(graceMs?: number): Promise<void>;
}

export interface StartProcessOptions {
  name: string;
  command: string;
  args: string[];
  logDir: string;
  cwd?: string;
  /** Added to the environment, after the variables named by `dropEnv` are removed. */
  env?: Record<string, string>;
  /** Prefixes of inherited variables to remove, e.g. CLUSTER_, which the child would read as config. */
  dropEnv?: string[];
  /** Called with the pid as soon as the process is spawned (the stack records it in stack.json). */
  onSpawn?: (pid: number) => void;
  /** What stop() sends first (SIGTERM unless given; PostgreSQL's fast shutdown is SIGINT). */
  stopSignal?: NodeJS.Signals;
  /** Another user to run as (PostgreSQL refuses root: stack/postgres.ts). */
  uid?: number;
  gid?: number;
}

// Children still running; killed when this Node process exits without stopping them (an
// uncaught error, process.exit in a signal handler), so no server outlives its owner.
const live = new Map<number, () => void>();
process.once('exit', () => {
  for (const kill of live.values()) kill();
});

/**
 * Writes a file through a temporary one and a rename, so that a process killed meanwhile
 * (the stack is stopped with SIGKILL too) leaves the old text or the new, never an empty or
 * half-written file that the next start could not read.
 */
export function writeFileAtomic(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

export function tail(file: string, lines = 20): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** This process's environment without the variables starting with `drop`, plus `add`. */
export function childEnv(drop: string[] = [], add: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!drop.some((prefix) => key.startsWith(prefix))) env[key] = value;
  }
  return { ...env, ...add };
}

export function startProcess(options: StartProcessOptions): ManagedProcess {
  const { name, command, args } = options;
  fs.mkdirSync(options.logDir, { recursive: true });
  const logFile = path.join(options.logDir, `${name}.log`);
  const fd = fs.openSync(logFile, 'a');
  fs.writeSync(fd, `\n--- ${new Date().toISOString()} ${command} ${args.join(' ')}\n`);
  // Own process group: a Ctrl-C in the terminal reaches only the Node process, which then
  // stops the pieces in order instead of all of them dying at once.
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: childEnv(options.dropEnv, options.env),
    stdio: ['ignore', fd, fd],
    detached: true,
    ...(options.uid === undefined ? {} : { uid: options.uid, gid: options.gid }),
  });
  fs.closeSync(fd);
  const pid = child.pid ?? -1;
  let exitedHow: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exitedHow = signal ? `signal ${signal}` : `code ${code}`;
      live.delete(pid);
      resolve();
    });
    child.once('error', (err) => {
      exitedHow = `spawn error: ${err.message}`;
      live.delete(pid);
      resolve();
    });
  });
  if (pid > 0) {
    live.set(pid, () => child.kill('SIGKILL'));
    options.onSpawn?.(pid);
  }

  const describe = (problem: string) => new Error(`${name}: ${problem}; last lines of ${logFile}:\n${tail(logFile)}`);

  return {
    name,
    pid,
    logFile,
    running: () => exitedHow === undefined,

    async waitFor(check, { timeoutMs, what, signal }) {
      const deadline = Date.now() + timeoutMs;
      let lastError = 'not tried yet';
      for (;;) {
        if (exitedHow !== undefined) throw describe(`exited (${exitedHow}) before ${what}`);
        if (signal?.aborted) throw describe(`aborted while waiting for ${what}`);
        try {
          return await check();
        } catch (err) {
          lastError = (err as Error).message;
        }
        if (Date.now() > deadline) throw describe(`no ${what} after ${timeoutMs} ms (last check: ${lastError})`);
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
    },

    async stop(graceMs = 10_000) {
      if (exitedHow !== undefined) return;
      child.kill(options.stopSignal ?? 'SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
