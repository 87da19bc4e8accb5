import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { devLayout } from './dev-layout';
import { DEFAULT_DRIVER_NAME } from '../common/names';
// eslint-disable-next-line import/no-restricted-paths -- `durable-csi dev` runs the dev server by design
import { startDevServer, type DevServer } from '../temporal-dev/dev-server';
import { watchParent } from './parent-watch';
import { describeHolder, poolHolders, stopProcess } from './pool-holders';
import { spawnCli, stopChild } from './spawn-cli';
import { DEV_NODE_FLAGS } from './dev-node-flags';
import { waitUntilReadyz } from './http-ready';

export interface DevStackOptions {
  dataDir: string;
  nodeCount: number;
  capacity: string;
  port: number;
  uiPort: number;
  /** The controller's metrics port; node agents take the ports after it. */
  metricsPort: number;
}

interface StackChild {
  name: string;
  args: string[];
  child: ChildProcess;
  exited: Promise<string>;
}

/**
 * The embedded default: Temporal dev server (SQLite under dataDir), one controller and N node agents, each its
 * own process as in a cluster. Everything persists under dataDir, so a restart keeps every volume.
 *
 * The whole stack stops, in order, when this process gets SIGINT, SIGTERM or SIGHUP, when its parent dies (npm
 * and its shell may die of a signal without passing it on), or when the Temporal server exits; if this process
 * itself is killed, its children stop on their own (docs/dev-stack.md). Resolves with the exit code.
 */
export async function runDevStack(options: DevStackOptions): Promise<number> {
  // A closed terminal or pipe must not turn a clean stop into a crash.
  process.stdout.on('error', () => undefined);
  const layout = devLayout(options.dataDir);
  const nodes = Array.from({ length: options.nodeCount }, (_, index) => `node-${index + 1}`);
  const pools = nodes.map((nodeId) => ({ nodeId, pool: layout.pool(nodeId) }));
  const held = poolHolders(pools);
  if (held.length > 0) {
    throw new Error(
      `the dev stack would not be whole, so it does not start:\n${held.map((h) => `  ${describeHolder(h)}`).join('\n')}\n` +
        `Stop ${held.length === 1 ? 'that process' : 'those processes'} (kill ${held.map((h) => h.pid).join(' ')}) and run again.`,
    );
  }
  const stack = new DevStack(layout.logs, pools);
  const stopRequested = stopRequests();
  let code = 0;
  try {
    const started = startStack(stack, layout, nodes, options);
    // Interrupted, it may still fail later (its processes are being stopped): that is no news.
    started.catch(() => undefined);
    const interrupted = await Promise.race([started.then(() => undefined), stopRequested]);
    const reason = interrupted ?? (await Promise.race([stopRequested, stack.serverExit()]));
    process.stdout.write(`stopping the dev stack: ${reason.why}\n`);
    code = reason.code;
  } catch (error) {
    process.stderr.write(`the dev stack could not start: ${error instanceof Error ? error.message : String(error)}\n`);
    code = 1;
  }
  await stack.stop();
  process.stdout.write('dev stack stopped\n');
  return code;
}

interface StopReason {
  why: string;
  code: number;
}

function stopRequests(): Promise<StopReason> {
  return new Promise((resolve) => {
    let requested = false;
    const request = (why: string) => {
      // A second request means "now": our children stop on their own once we are gone.
      if (requested) process.exit(130);
      requested = true;
      resolve({ why, code: 0 });
    };
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => request(signal));
    watchParent(() => request('its parent process is gone'));
  });
}

async function startStack(
  stack: DevStack,
  layout: ReturnType<typeof devLayout>,
  nodes: string[],
  options: DevStackOptions,
): Promise<void> {
  const server = await stack.startServer({ dataDir: layout.temporal, port: options.port, uiPort: options.uiPort });
  const temporal = ['--temporal-address', server.address, '--temporal-namespace', server.namespace];
  const metricsAt = (index: number) => `127.0.0.1:${options.metricsPort + index}`;
  const controllerEndpoint = `unix://${layout.controllerSocket}`;
  const controllerArgs = ['controller', '--endpoint', controllerEndpoint, '--driver-name', DEFAULT_DRIVER_NAME];
  fs.mkdirSync(layout.kubelet, { recursive: true });
  const starting = [stack.start('controller', [...controllerArgs, ...temporal, '--metrics-address', metricsAt(0)])];
  nodes.forEach((nodeId, index) => {
    const args = ['node', '--endpoint', `unix://${layout.nodeSocket(nodeId)}`, '--node-id', nodeId];
    args.push('--backend', 'dir', '--pool', layout.pool(nodeId), '--capacity', options.capacity, ...temporal);
    args.push('--kubelet-dir', layout.kubelet, ...DEV_NODE_FLAGS);
    starting.push(stack.start(nodeId, [...args, '--metrics-address', metricsAt(index + 1)]));
  });
  await Promise.all(starting);
  const lines = [
    'durable-csi dev stack is up',
    `  Temporal:    ${server.address} (namespace ${server.namespace})`,
    `  Web UI:      ${server.uiUrl ?? 'disabled'}`,
    `  controller:  ${controllerEndpoint}`,
    ...nodes.map((nodeId) => `  ${nodeId.padEnd(12)} unix://${layout.nodeSocket(nodeId)}  pool ${layout.pool(nodeId)}`),
    `  metrics:     http://${metricsAt(0)}/metrics (controller), ports ${options.metricsPort + 1}+ for the nodes`,
    `  logs:        ${layout.logs}`,
    'Try: npx durable-csi volumes create demo --size 1Gi    (Ctrl-C stops everything; data stays in the data dir)',
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

/** The processes of one stack, and how to stop them: node agents and controller first, Temporal last. */
class DevStack {
  private server?: Promise<DevServer>;
  private serverLog = '';
  private readonly children: StackChild[] = [];
  private stopping = false;

  constructor(
    private readonly logs: string,
    private readonly pools: { nodeId: string; pool: string }[],
  ) {}

  startServer(options: { dataDir: string; port: number; uiPort: number }): Promise<DevServer> {
    this.serverLog = path.join(options.dataDir, 'temporal.log');
    this.server = startDevServer({ ...options, supervised: true, probeInChild: true });
    return this.server;
  }

  /** Resolves if the Temporal server exits before we stop it: nothing works without it. */
  async serverExit(): Promise<StopReason> {
    const server = await this.server;
    if (!server) return new Promise(() => undefined);
    const how = await server.exited;
    return { why: `the Temporal server ${how} (see ${this.serverLog})`, code: 1 };
  }

  /** Spawns `durable-csi <args>` and waits until its /readyz answers ready; fails if it exits first. */
  async start(name: string, args: string[]): Promise<void> {
    if (this.stopping) throw new Error(`not starting ${name}: the stack is stopping`);
    const logFile = path.join(this.logs, `${name}.log`);
    const logStart = fs.existsSync(logFile) ? fs.statSync(logFile).size : 0;
    const child = spawnCli(args, logFile);
    const exited = new Promise<string>((resolve) =>
      child.once('exit', (code, signal) => resolve(signal ?? `code ${String(code)}`)),
    );
    this.children.push({ name, args, child, exited });
    let ready = false;
    void exited.then((how) => {
      if (ready && !this.stopping) {
        process.stdout.write(`${name} stopped (${how}); to start it again: npx durable-csi ${args.join(' ')}\n`);
      }
    });
    // Every child of the stack serves /readyz on its metrics address: the same readiness as its CSI Probe.
    const metricsAddress = args[args.indexOf('--metrics-address') + 1] ?? '';
    const early = exited.then((how) => {
      throw new Error(
        `${name} exited while starting (${how}); last lines of ${logFile}:\n${logTail(logFile, logStart)}`,
      );
    });
    early.catch(() => undefined); // an exit after startup is reported above
    await Promise.race([waitUntilReadyz(metricsAddress), early]);
    ready = true;
  }

  /** Stops every process of the stack, including node agents restarted by hand on its pools. */
  async stop(): Promise<void> {
    this.stopping = true;
    const ours = new Set(this.children.map(({ child }) => child.pid));
    const strays = poolHolders(this.pools).filter((holder) => !ours.has(holder.pid));
    for (const stray of strays) {
      process.stdout.write(`stopping ${stray.nodeId} too (process ${stray.pid}, started outside the stack)\n`);
    }
    await Promise.all([
      ...this.children.map(({ child }) => stopChild(child)),
      ...strays.map((stray) => stopProcess(stray.pid)),
    ]);
    const server = await this.server?.catch(() => undefined);
    await server?.stop();
  }
}

function logTail(logFile: string, from: number, lines = 20): string {
  try {
    return fs.readFileSync(logFile).subarray(from).toString('utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch (error) {
    return `(could not read it: ${error instanceof Error ? error.message : String(error)})`;
  }
}
