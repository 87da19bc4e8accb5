import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLI_MAIN } from '../../agent/spawn-cli';
import { findFreePort, findFreePortRange } from '../../temporal-dev/free-port';
import { findProjectRoot } from '../../common/project-root';
import { eventually } from './eventually';

/** `durable-csi dev` (or `npm run dev`) as a user starts it: a plain child with its output captured. */
export class DevStackProcess {
  readonly dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-dev-'));
  child?: ChildProcess;
  output = '';
  exit?: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  /** Free ports for the server, the UI and the controller's and each node's metrics. */
  async args(nodes: number): Promise<string[]> {
    const [port, uiPort] = [await findFreePort(), await findFreePort()];
    const metrics = await findFreePortRange(nodes + 1);
    const ports = ['--port', String(port), '--ui-port', String(uiPort), '--metrics-port', String(metrics)];
    return ['--data-dir', this.dataDir, '--nodes', String(nodes), '--capacity', '1Gi', ...ports];
  }

  /** Starts it; `via: 'npm'` runs `npm run dev -- ...` from the project root, as the README says. */
  start(args: string[], via: 'node' | 'npm' = 'node'): void {
    const [command, commandArgs] =
      via === 'npm' ? ['npm', ['run', 'dev', '--', ...args]] : [process.execPath, [CLI_MAIN, 'dev', ...args]];
    const child = spawn(command, commandArgs, { cwd: findProjectRoot(), stdio: ['ignore', 'pipe', 'pipe'] });
    const collect = (chunk: Buffer) => (this.output += chunk.toString('utf8'));
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    this.exit = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    this.child = child;
  }

  /** Waits for the banner; fails with the output so far if it never comes or the stack exits. */
  async up(timeoutMs = 90_000): Promise<string> {
    let exited = false;
    void this.exit?.then(() => (exited = true));
    await eventually('dev stack up', () => this.output.includes('dev stack is up') || exited, timeoutMs).catch(
      (error: unknown) => {
        throw new Error(`${String(error)}; output:\n${this.output}`);
      },
    );
    if (exited) throw new Error(`the dev stack exited while starting:\n${this.output}`);
    return this.output;
  }

  /** The live (not zombie) processes whose command line names our data dir: the stack's, whoever started them. */
  processes(): { pid: number; command: string }[] {
    return stackProcesses(this.dataDir);
  }

  pidOf(fragment: string): number {
    const found = this.processes().find((entry) => entry.command.includes(fragment));
    if (!found) throw new Error(`no process of the stack matches "${fragment}": ${JSON.stringify(this.processes())}`);
    return found.pid;
  }

  /** Asserts, after giving it time to stop, that nothing of the stack is left. */
  async nothingLeft(timeoutMs = 45_000): Promise<void> {
    await eventually('no process of the stack left', () => this.processes().length === 0, timeoutMs).catch(() => {
      throw new Error(`processes left: ${JSON.stringify(this.processes(), null, 2)}\noutput:\n${this.output}`);
    });
  }

  /** Last resort for a failed test: SIGKILL whatever is left, then remove the data. */
  cleanup(): void {
    for (const { pid } of this.processes()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}

export function stackProcesses(dataDir: string): { pid: number; command: string }[] {
  const found: { pid: number; command: string }[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      const command = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ');
      if (command.includes(dataDir)) found.push({ pid: Number(entry), command });
    } catch {
      // exited while we looked
    }
  }
  return found;
}
