import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { ServiceName } from './server-config';

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * One temporal-server service (`start --service <name>`) as its own OS process, so a test can kill it alone.
 * An exit nobody asked for is recorded: the harness reports it instead of carrying on with a broken cluster.
 */
export class ServiceProcess {
  private child?: ChildProcess;
  private exited?: Promise<Exit>;
  private expectExit = false;
  readonly unexpectedExits: string[] = [];

  constructor(
    readonly name: ServiceName,
    private readonly binary: string,
    private readonly configFile: string,
    readonly logFile: string,
  ) {}

  get pid(): number | undefined {
    return this.alive() ? this.child?.pid : undefined;
  }

  alive(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    if (this.alive()) return;
    const args = ['--config-file', this.configFile, '--allow-no-auth', 'start', '--service', this.name];
    fs.appendFileSync(this.logFile, `--- ${new Date().toISOString()} ${this.binary} ${args.join(' ')}\n`);
    const log = fs.openSync(this.logFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(this.binary, args, { stdio: ['ignore', log, log] });
    } finally {
      fs.closeSync(log);
    }
    this.child = child;
    this.expectExit = false;
    this.exited = new Promise<Exit>((resolve) => {
      child.once('error', () => resolve({ code: null, signal: null }));
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
    void this.exited.then((exit) => {
      if (child === this.child && !this.expectExit)
        this.unexpectedExits.push(`${this.name} exited with ${exit.signal ?? `code ${String(exit.code)}`}`);
    });
  }

  /** Sends the signal and waits for the exit (SIGKILL after 15 s if a SIGTERM is not enough). */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    this.expectExit = true;
    if (!this.alive() || !this.child) return;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), 15_000);
    await this.exited;
    clearTimeout(timer);
  }

  /** Why it is not running, for error messages. */
  async exitReason(): Promise<string | undefined> {
    if (this.alive() || !this.exited) return undefined;
    const exit = await this.exited;
    return `exited with ${exit.signal ?? `code ${String(exit.code)}`}`;
  }

  logTail(lines = 30): string {
    try {
      const tail = fs.readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines);
      // Server errors carry Go stack traces: the message is what helps.
      return tail.map((line) => (line.length > 600 ? `${line.slice(0, 600)}…` : line)).join('\n');
    } catch {
      return '(no log)';
    }
  }
}
