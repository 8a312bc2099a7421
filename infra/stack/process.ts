// A child process of the local stack: output appended to its log file, stopped with
// SIGTERM (SIGKILL after a grace period), and health waits that show the log's tail when
// the piece does not come up.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface Managed {
  name: string;
  pid: number;
  logFile: string;
  /** Rejects if the process exits before stop() is called. */
  exited: Promise<never>;
  stop(): Promise<void>;
}

export function tail(file: string, lines = 20): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export function launch(
  name: string,
  command: string,
  args: string[],
  options: { logDir: string; env?: NodeJS.ProcessEnv; cwd?: string },
): Managed {
  fs.mkdirSync(options.logDir, { recursive: true });
  const logFile = path.join(options.logDir, `${name}.log`);
  const fd = fs.openSync(logFile, 'a');
  fs.writeSync(fd, `\n--- ${new Date().toISOString()} ${command} ${args.join(' ')}\n`);
  const child: ChildProcess = spawn(command, args, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', fd, fd],
  });
  fs.closeSync(fd);
  let stopping = false;
  const exitedAt = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(String(signal ?? code))));
  const exited = new Promise<never>((_, reject) => {
    void exitedAt.then((how) => {
      if (!stopping) reject(new Error(`${name} exited (${how}) unexpectedly; last lines of ${logFile}:\n${tail(logFile)}`));
    });
  });
  exited.catch(() => undefined); // observed by waitHealthy or the owner; never unhandled
  return {
    name,
    pid: child.pid ?? -1,
    logFile,
    exited,
    async stop() {
      stopping = true;
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exitedAt;
      clearTimeout(timer);
    },
  };
}

/** Polls `check` until it resolves; fails with the log's tail on timeout or early exit. */
export async function waitHealthy(proc: Managed, check: () => Promise<unknown>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  let died: Error | undefined;
  proc.exited.catch((err: Error) => (died = err));
  for (;;) {
    if (died) throw died;
    try {
      await check();
      return;
    } catch (err) {
      lastError = (err as Error).message;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${proc.name} not healthy after ${timeoutMs} ms (${lastError}); last lines of ${proc.logFile}:\n${tail(proc.logFile)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
