import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { stopChild } from '../../agent/spawn-cli';
import { waitUntilReady } from '../../agent/wait-ready';
import { DEV_NODE_FLAGS } from '../../agent/dev-node-flags';
import { TEST_NODE_FLAGS } from '../support/cluster';
import { parseMountInfoLine } from '../../storage/host/mounts';
import { releaseMountsUnder } from '../unit/storage/mount-helpers';
import { adaptArgs, type Build } from './baseline';

export interface UnexpectedExit {
  process: string;
  build: string;
  at: string;
  code: number | null;
  signal: string | null;
  logTail: string;
}

interface ExitInfo {
  at: number;
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ClusterConfig {
  root: string;
  driverName: string;
  /** The driver's Temporal flags (address, namespace, TLS). */
  temporalFlags: string[];
  nodes: number;
  /** Each node agent's backend, by index (options.ts, nodeBackends). */
  backends: string[];
  capacity: string;
  callWait: string;
  progress(message: string): void;
}

/**
 * One controller replica or node agent, started from a given build as its own OS process. Start, stop and kill
 * are serialized per process. An exit nobody asked for is recorded (it is a driver bug) and the process is
 * restarted, as Kubernetes would.
 */
export class DriverProcess {
  build?: Build;
  private child?: ChildProcess;
  private exited?: Promise<ExitInfo>;
  private expectExit = false;
  private queue: Promise<unknown> = Promise.resolve();
  /** [exit time, next spawn time): when no process of this name could have done any work. */
  readonly downIntervals: { from: number; to?: number }[] = [];

  constructor(
    private readonly cluster: Cluster,
    readonly name: string,
    readonly kind: 'controller' | 'node',
    readonly endpoint: string,
    private readonly args: string[],
  ) {}

  get logFile(): string {
    return path.join(this.cluster.config.root, 'logs', `${this.name}.log`);
  }

  get pid(): number | undefined {
    return this.alive() ? this.child?.pid : undefined;
  }

  alive(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process (stopping a running one first). With failpoints armed, dying is expected. */
  start(build: Build, options: { env?: NodeJS.ProcessEnv; waitReady?: boolean; failpoints?: string } = {}) {
    return this.serial(async () => {
      if (this.alive()) await this.doStop();
      const { args, dropped } = adaptArgs(build, this.args);
      // A hidden flag (absent from --help, so adaptArgs cannot keep it); builds before it read the environment.
      const viaFlag = options.failpoints !== undefined && build.label === 'new';
      if (viaFlag) args.push('--failpoints', options.failpoints ?? '');
      if (dropped.length > 0)
        this.cluster.adaptations.add(`${build.label} ${this.kind}: left out ${dropped.join(', ')}`);
      const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'info', ...options.env };
      if (options.failpoints && !viaFlag) env.DURABLE_CSI_FAILPOINTS = options.failpoints;
      else delete env.DURABLE_CSI_FAILPOINTS;
      fs.mkdirSync(path.dirname(this.logFile), { recursive: true });
      fs.appendFileSync(
        this.logFile,
        `--- ${new Date().toISOString()} soak: start ${build.label} ${options.failpoints ?? ''} ${args.join(' ')}\n`,
      );
      const log = fs.openSync(this.logFile, 'a');
      let child: ChildProcess;
      try {
        child = spawn(process.execPath, [build.cliMain, ...args], { stdio: ['ignore', log, log], env });
      } finally {
        fs.closeSync(log);
      }
      const last = this.downIntervals[this.downIntervals.length - 1];
      if (last && last.to === undefined) last.to = Date.now();
      this.build = build;
      this.child = child;
      this.expectExit = options.failpoints !== undefined;
      const exited = new Promise<ExitInfo>((resolve) =>
        child.once('exit', (code, signal) => resolve({ at: Date.now(), code, signal })),
      );
      this.exited = exited;
      void exited.then((info) => this.onExit(child, info));
      if (options.waitReady ?? true) await this.waitReady(child, exited, options.failpoints !== undefined);
    });
  }

  /** SIGTERM, as a rollout does (SIGKILL after 15 s). */
  stop(): Promise<void> {
    return this.serial(() => this.doStop());
  }

  /** SIGKILL (or another signal), waiting for the exit. */
  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    return this.serial(async () => {
      this.expectExit = true;
      if (!this.alive()) return;
      this.child?.kill(signal);
      await this.exited;
    });
  }

  /** Resolves when the current process exits (at once when none runs), with how it ended. */
  async waitExit(timeoutMs: number): Promise<ExitInfo | undefined> {
    if (!this.exited) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs)));
    const info = await Promise.race([this.exited, timeout]);
    clearTimeout(timer);
    return info;
  }

  /** Whether the process was down (no process at all) during the whole of [from, to]. */
  downThroughout(from: number, to: number): boolean {
    return this.downIntervals.some((interval) => interval.from <= from && (interval.to ?? Infinity) >= to);
  }

  private async doStop(): Promise<void> {
    this.expectExit = true;
    if (!this.child || !this.alive()) return;
    await stopChild(this.child, 15_000);
    await this.exited;
  }

  private onExit(child: ChildProcess, info: ExitInfo): void {
    if (child !== this.child) return;
    this.downIntervals.push({ from: info.at });
    if (this.expectExit) return;
    const tail = fs.existsSync(this.logFile) ? fs.readFileSync(this.logFile, 'utf8').split('\n').slice(-30) : [];
    this.cluster.unexpectedExits.push({
      process: this.name,
      build: this.build?.label ?? '?',
      at: new Date(info.at).toISOString(),
      code: info.code,
      signal: info.signal,
      logTail: tail.join('\n'),
    });
    this.cluster.config.progress(`${this.name} exited on its own (${info.signal ?? info.code}); restarting it`);
    const build = this.build;
    setTimeout(() => {
      // Someone else restarted or deliberately stopped it meanwhile.
      if (child !== this.child || this.expectExit || !build) return;
      this.start(build).catch((error: unknown) => this.cluster.config.progress(`${this.name}: ${String(error)}`));
    }, 2000);
  }

  private async waitReady(child: ChildProcess, exited: Promise<ExitInfo>, mayDie: boolean): Promise<void> {
    const died = exited.then((info) => {
      if (!mayDie) throw new Error(`exited with ${info.signal ?? info.code}`);
    });
    died.catch(() => undefined);
    try {
      await Promise.race([waitUntilReady(this.endpoint, 90_000), died]);
    } catch (error) {
      const log = fs.existsSync(this.logFile) ? fs.readFileSync(this.logFile, 'utf8').slice(-3000) : '';
      if (child === this.child && this.alive()) child.kill('SIGKILL');
      throw new Error(`${this.name} did not start: ${String(error)}\n${log}`);
    }
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }
}

/** Two controller replicas and N node agents of one driver, with pools, sockets and logs under one root. */
export class Cluster {
  readonly controllers: DriverProcess[];
  readonly nodes: DriverProcess[];
  readonly unexpectedExits: UnexpectedExit[] = [];
  readonly adaptations = new Set<string>();

  constructor(readonly config: ClusterConfig) {
    const socket = (name: string) => `unix://${path.join(config.root, 'sock', `${name}.sock`)}`;
    fs.mkdirSync(path.join(config.root, 'sock'), { recursive: true });
    fs.mkdirSync(path.join(config.root, 'kubelet'), { recursive: true });
    const temporal = config.temporalFlags;
    this.controllers = ['controller-1', 'controller-2'].map((name) => {
      const args = ['controller', '--endpoint', socket(name), '--driver-name', config.driverName];
      return new DriverProcess(this, name, 'controller', socket(name), [
        ...args,
        '--call-wait',
        config.callWait,
        // The snapshot service (docs/snapshots.md); a build without it gets the flag left out (adaptArgs).
        '--snapshots',
        ...temporal,
      ]);
    });
    this.nodes = Array.from({ length: config.nodes }, (_, index) => {
      const nodeId = `node-${index + 1}`;
      const args = ['node', '--endpoint', socket(nodeId), '--node-id', nodeId, '--driver-name', config.driverName];
      args.push('--backend', this.backendOf(nodeId), '--pool', this.pool(nodeId), '--capacity', config.capacity);
      // Staging and target paths of the kubelet calls some faults make (faults/temporal-outage.ts).
      args.push('--kubelet-dir', this.kubeletDir());
      // The tests' presence timeout (test/support/cluster.ts), so that --long-down is past it for every build; a
      // build before the flag gets it left out (adaptArgs) and keeps the 30 s of its time.
      args.push(...TEST_NODE_FLAGS);
      return new DriverProcess(this, nodeId, 'node', socket(nodeId), [...args, ...DEV_NODE_FLAGS, ...temporal]);
    });
  }

  backendOf(nodeId: string): string {
    const index = Number(/^node-(\d+)$/.exec(nodeId)?.[1]) - 1;
    const backend = this.config.backends[index];
    if (backend === undefined) throw new Error(`no backend for ${nodeId}`);
    return backend;
  }

  pool(nodeId: string): string {
    return path.join(this.config.root, 'pools', nodeId);
  }

  /** What the node agents take as kubelet's directory (one for all: their paths differ by volume). */
  kubeletDir(): string {
    return path.join(this.config.root, 'kubelet');
  }

  all(): DriverProcess[] {
    return [...this.controllers, ...this.nodes];
  }

  node(nodeId: string): DriverProcess {
    const found = this.nodes.find((node) => node.name === nodeId);
    if (!found) throw new Error(`no node ${nodeId}`);
    return found;
  }

  async startAll(controllers: Build, nodes: Build = controllers): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.start(nodes)));
    await Promise.all(this.controllers.map((controller) => controller.start(controllers)));
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.all().map((process) => process.stop()));
  }

  /**
   * Undoes what kubelet calls of a fault that failed half-way left under the work folder: mounts (thawed first: a
   * frozen filesystem would hold its unmount) and the loop devices of the pools' images. Before the folder is
   * removed: rm -r across a mount point deletes the volume's files. Run with every agent stopped.
   */
  releaseMounts(): void {
    if (!fs.existsSync(this.config.root)) return;
    for (const mountPoint of loopMountsUnder(this.config.root)) spawnSync('fsfreeze', ['--unfreeze', mountPoint]);
    releaseMountsUnder(this.config.root);
  }
}

/** Mount points under root of a loop device's filesystem (kubelet's staging and target paths, in the soak). */
export function loopMountsUnder(root: string): string[] {
  const real = fs.realpathSync(root);
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .flatMap((line) => parseMountInfoLine(line) ?? [])
    .filter((entry) => entry.source.startsWith('/dev/loop') && entry.mountPoint.startsWith(`${real}/`))
    .map((entry) => entry.mountPoint);
}
