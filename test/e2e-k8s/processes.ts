import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** A process of the e2e (control plane, sidecar or driver), its output in its own log file. */
export interface Proc {
  name: string;
  child: ChildProcess;
  log: string;
  exited: Promise<void>;
  running(): boolean;
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** SIGTERM, then SIGKILL after graceMs. */
  stop(graceMs?: number): Promise<void>;
  tail(chars?: number): string;
}

export function startProcess(
  name: string,
  command: string,
  args: string[],
  options: { logDir: string; env?: NodeJS.ProcessEnv; cwd?: string; stdin?: 'ignore' | 'pipe' },
): Proc {
  fs.mkdirSync(options.logDir, { recursive: true });
  const log = path.join(options.logDir, `${name}.log`);
  const fd = fs.openSync(log, 'a');
  fs.writeSync(fd, `--- ${new Date().toISOString()} ${command} ${args.join(' ')}\n`);
  let child: ChildProcess;
  try {
    child = spawn(command, args, {
      stdio: [options.stdin ?? 'ignore', fd, fd],
      env: options.env ?? process.env,
      cwd: options.cwd,
    });
  } finally {
    fs.closeSync(fd);
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (running()) child.kill(signal);
    await exited;
  };
  return {
    name,
    child,
    log,
    exited,
    running,
    kill,
    async stop(graceMs = 10_000) {
      if (!running()) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
    tail(chars = 3000) {
      return fs.existsSync(log) ? fs.readFileSync(log, 'utf8').slice(-chars) : '';
    },
  };
}
