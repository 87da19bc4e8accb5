/**
 * A cp(1) that waits for the test: a node agent started with `env()` finds this cp first on its PATH (storage/host/
 * tools.ts puts the agent's PATH before the system directories). Each run appends its pid to `started`, waits until
 * the gate is opened, then becomes the real cp: a copy as long as the test wants, made by real processes.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export class CopyGate {
  private readonly bin: string;
  private readonly startedFile: string;
  private readonly openFile: string;

  constructor(dir: string, only?: string) {
    fs.mkdirSync(dir, { recursive: true });
    this.bin = path.join(dir, 'bin');
    this.startedFile = path.join(dir, 'started');
    this.openFile = path.join(dir, 'open');
    const realCp = execFileSync('sh', ['-c', 'command -v cp'], { encoding: 'utf8' }).trim();
    if (!path.isAbsolute(realCp)) throw new Error(`no cp found on PATH (got "${realCp}")`);
    fs.mkdirSync(this.bin, { recursive: true });
    if (only !== undefined && !/^[\w./-]+$/.test(only)) throw new Error(`copy gate filter ${only} is not a plain path`);
    const script = [
      '#!/bin/sh',
      ...(only === undefined ? [] : [`case "$*" in *'${only}'*) ;; *) exec '${realCp}' "$@" ;; esac`]),
      `echo $$ >> '${this.startedFile}'`,
      `while [ ! -e '${this.openFile}' ]; do sleep 0.05; done`,
      `exec '${realCp}' "$@"`,
      '',
    ].join('\n');
    fs.writeFileSync(path.join(this.bin, 'cp'), script, { mode: 0o755 });
  }

  /** The environment of an agent whose copies wait at this gate. */
  env(): NodeJS.ProcessEnv {
    return { PATH: `${this.bin}:${process.env.PATH ?? ''}` };
  }

  /** The pids of every cp run so far, in order. */
  started(): number[] {
    if (!fs.existsSync(this.startedFile)) return [];
    return fs.readFileSync(this.startedFile, 'utf8').split('\n').filter(Boolean).map(Number);
  }

  /** Resolves once `count` copies have started. */
  async untilStarted(count: number, timeoutMs = 30_000): Promise<number[]> {
    const until = Date.now() + timeoutMs;
    while (this.started().length < count) {
      if (Date.now() > until) throw new Error(`${count} copies did not start within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    return this.started();
  }

  open(): void {
    fs.writeFileSync(this.openFile, '');
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
