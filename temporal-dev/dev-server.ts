import { spawn } from 'child_process';
import type { ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { dieWithParent } from './die-with-parent';
import { isPortFree } from './free-port';
import { locateTemporalCli } from './locate-cli';
import { SEARCH_ATTRIBUTES } from '../temporal/search-attributes';
import { probeServer } from './server-probe';

export interface DevServerOptions {
  /** Holds temporal.db (SQLite, kept across restarts) and, by default, temporal.log. */
  dataDir: string;
  /** Frontend gRPC port (default 7233). The CLI rejects 0: use findFreePort(). */
  port?: number;
  /** Web UI port (default port + 1000). */
  uiPort?: number;
  headless?: boolean;
  namespace?: string;
  logFile?: string;
  /** Path to the Temporal CLI; located (and installed if needed) when omitted. */
  cli?: string;
  /** More `temporal server start-dev` flags (benchmarks: --metrics-port). */
  extraArgs?: string[];
  /**
   * For a caller that stops the server itself, in order (durable-csi dev): where the kernel can stop the server
   * if the caller dies (Linux, die-with-parent.ts), the server gets its own process group, so that a terminal's
   * Ctrl-C reaches only the caller.
   */
  supervised?: boolean;
  /**
   * Probe readiness from a child process that exits once the server is ready, so that this process never loads the
   * Temporal client (durable-csi dev's supervisor, which holds nothing else: docs/performance.md, round 4).
   */
  probeInChild?: boolean;
  /** Port of the server's Prometheus `/metrics` endpoint (the CLI picks a random one when omitted). */
  metricsPort?: number;
  /** Dynamic config values; replaces DEV_SERVER_DYNAMIC_CONFIG when given (`{}`: the server's own defaults). */
  dynamicConfig?: DynamicConfig;
}

export type DynamicConfig = Record<string, number | boolean | string>;

/**
 * What the dev server runs with beyond its defaults, each setting measured by `npm run bench`
 * (docs/performance.md). The defaults suit a many-shard cluster; the dev server has one history shard.
 */
export const DEV_SERVER_DYNAMIC_CONFIG: DynamicConfig = {
  // Reads of the single shard's transfer queue (which hands out every workflow and activity task) were capped
  // at 20 a second: at concurrency 1 each task waited up to 50 ms to be dispatched.
  'history.transferProcessorMaxPollRPS': 1000,
};

export interface DevServer {
  /** host:port of the frontend, e.g. 127.0.0.1:7233. */
  address: string;
  uiUrl: string | undefined;
  namespace: string;
  pid: number;
  /** Resolves with how the process ended, whenever it does (stopped, or on its own). */
  exited: Promise<string>;
  /** The Prometheus endpoint, when a metrics port was asked for. */
  metricsUrl: string | undefined;
  /** SIGTERM, then SIGKILL after 15 s. Safe to call more than once. */
  stop(): Promise<void>;
}

const DEFAULT_NAMESPACE = 'default';
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;
const PROBE_INTERVAL_MS = 250;

/** Starts `temporal server start-dev` on 127.0.0.1, persisted in dataDir, and waits until it serves. */
export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const port = options.port ?? 7233;
  const uiPort = options.uiPort ?? port + 1000;
  const headless = options.headless === true;
  const namespace = options.namespace ?? DEFAULT_NAMESPACE;
  const address = `127.0.0.1:${port}`;
  // Checked up front: otherwise readiness probes would talk to whatever holds the port.
  const ports = [
    port,
    ...(headless ? [] : [uiPort]),
    ...(options.metricsPort === undefined ? [] : [options.metricsPort]),
  ];
  for (const p of ports) {
    if (!(await isPortFree(p))) {
      throw new Error(`Cannot start the Temporal dev server: 127.0.0.1:${p} is already in use`);
    }
  }
  const cli = options.cli ?? (await locateTemporalCli());
  const args = [
    ...devServerArgs({
      dataDir: options.dataDir,
      port,
      uiPort,
      headless,
      namespace,
      metricsPort: options.metricsPort,
      dynamicConfig: options.dynamicConfig ?? DEV_SERVER_DYNAMIC_CONFIG,
    }),
    ...(options.extraArgs ?? []),
  ];

  fs.mkdirSync(options.dataDir, { recursive: true });
  const logFile = options.logFile ?? path.join(options.dataDir, 'temporal.log');
  // Append so earlier runs stay inspectable; error reports only show this run (from logStart on).
  const logStart = fs.existsSync(logFile) ? fs.statSync(logFile).size : 0;
  const logFd = fs.openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    fs.writeSync(logFd, `--- ${new Date().toISOString()} ${cli} ${args.join(' ')}\n`);
    // Same process group unless supervised: a terminal Ctrl-C reaches the server too, so it never outlives us.
    const guarded = options.supervised ? dieWithParent(cli, args) : undefined;
    const [command, commandArgs] = guarded ?? [cli, args];
    child = spawn(command, commandArgs, { stdio: ['ignore', logFd, logFd], detached: guarded !== undefined });
  } finally {
    fs.closeSync(logFd);
  }

  const exited = new Promise<string>((resolve) => {
    child.once('error', (err) => resolve(`could not start ${cli}: ${err.message}`));
    child.once('exit', (code, signal) => resolve(`exited with ${signal ?? `code ${String(code)}`}`));
  });
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopping ??= stopChild(child, exited));

  const notReady = await waitUntilReady(address, namespace, exited, options.probeInChild === true);
  if (notReady !== undefined) {
    await stop();
    throw new Error(
      `Temporal dev server (${cli} ${args.join(' ')}) did not become ready: ${notReady}\n` +
        `Last lines of ${logFile}:\n${readLogTail(logFile, logStart)}`,
    );
  }
  if (child.pid === undefined) throw new Error('Temporal dev server has no pid');
  return {
    address,
    uiUrl: headless ? undefined : `http://127.0.0.1:${uiPort}`,
    namespace,
    pid: child.pid,
    exited,
    metricsUrl: options.metricsPort === undefined ? undefined : `http://127.0.0.1:${options.metricsPort}/metrics`,
    stop,
  };
}

/** The exact CLI arguments; exported so docs and tests can show them. */
export function devServerArgs(o: {
  dataDir: string;
  port: number;
  uiPort: number;
  headless: boolean;
  namespace: string;
  metricsPort?: number;
  dynamicConfig?: DynamicConfig;
}): string[] {
  return [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(o.port),
    ...(o.headless ? ['--headless'] : ['--ui-port', String(o.uiPort)]),
    '--db-filename',
    path.join(o.dataDir, 'temporal.db'),
    // WAL lets the server's concurrent connections read while one writes; NORMAL is durable enough with WAL.
    '--sqlite-pragma',
    'journal_mode=wal',
    '--sqlite-pragma',
    'synchronous=normal',
    ...Object.entries(SEARCH_ATTRIBUTES).flatMap(([name, type]) => ['--search-attribute', `${name}=${type}`]),
    '--log-level',
    'warn',
    ...(o.metricsPort === undefined ? [] : ['--metrics-port', String(o.metricsPort)]),
    ...Object.entries(o.dynamicConfig ?? DEV_SERVER_DYNAMIC_CONFIG).flatMap(([key, value]) => [
      '--dynamic-config-value',
      `${key}=${JSON.stringify(value)}`,
    ]),
    ...(o.namespace === DEFAULT_NAMESPACE ? [] : ['--namespace', o.namespace]),
  ];
}

/**
 * Resolves undefined once ready, else a reason (process exited, or timeout with the last probe error). With inChild,
 * the probes run in a child process (server-probe.ts) that exits once the server is ready.
 */
async function waitUntilReady(
  address: string,
  namespace: string,
  exited: Promise<string>,
  inChild: boolean,
): Promise<string | undefined> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  // Wrapped so an exit can be told apart from a probe result when racing them.
  const exit = exited.then((reason) => ({ exit: `the process ${reason}` }));
  if (inChild) {
    const outcome = await Promise.race([probeFromChild(address, namespace, deadline, exited), exit]);
    if (typeof outcome === 'object') return outcome.exit;
    return outcome === undefined ? undefined : `timed out after ${READY_TIMEOUT_MS / 1000} s; last check: ${outcome}`;
  }
  for (;;) {
    const outcome = await Promise.race([probeServer(address, namespace), exit]);
    if (typeof outcome === 'object') return outcome.exit;
    if (outcome === undefined) return undefined;
    if (Date.now() >= deadline) return `timed out after ${READY_TIMEOUT_MS / 1000} s; last check: ${outcome}`;
    const pause = new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
    const early = await Promise.race([pause.then(() => undefined), exit]);
    if (early !== undefined) return early.exit;
  }
}

/**
 * server-probe.ts as a child process: undefined once the server is ready, else its last answer. The child is
 * tethered by an IPC channel (it exits when we do) and killed if the server exits first.
 */
function probeFromChild(address: string, namespace: string, deadline: number, exited: Promise<string>) {
  const script = path.join(__dirname, 'server-probe.js');
  const child = spawn(process.execPath, [script, address, namespace, String(deadline)], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  child.channel?.unref();
  void exited.then(() => child.kill());
  return new Promise<string | undefined>((resolve) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.once('error', (error) => resolve(error.message));
    child.once('exit', (code) => resolve(code === 0 ? undefined : out || `the probe exited with ${String(code)}`));
  });
}

/** Resolves once the process is gone; a no-op (apart from awaiting `exited`) if it already exited. */
async function stopChild(child: ChildProcess, exited: Promise<string>): Promise<void> {
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), STOP_TIMEOUT_MS)));
  const stuck = await Promise.race([exited.then(() => false), timedOut]);
  clearTimeout(timer);
  if (stuck) {
    child.kill('SIGKILL');
    await exited;
  }
}

function readLogTail(logFile: string, from: number, lines = 40): string {
  try {
    const text = fs.readFileSync(logFile).subarray(from).toString('utf8');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  } catch (err) {
    return `(could not read the log: ${err instanceof Error ? err.message : String(err)})`;
  }
}
