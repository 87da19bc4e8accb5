/**
 * The memory floor of a Temporal worker process on this machine (issue 23): `node dist/test/bench/floor.js`. Starts a
 * dev server, then one process per step, each with the agents' runtime settings, and prints its resident memory
 * once it has settled: a bare Node.js; the SDK's native bridge alone (a runtime and a client connected, no SDK
 * JavaScript); `@temporalio/worker` loaded and connected; an activity-only worker running (what a node agent is, without
 * the driver); then the real node agent beside them (`durable-csi node` from dist/, with a controller running its
 * node record, on the same dev server), idle. Each line gives RSS (anonymous and file-backed parts), threads, the main
 * thread's heap in use, external and array buffer memory, and the modules loaded. `--settle 60` waits a minute before
 * each reading (issue 38's method); `--steps worker-running,node-agent` runs only those.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const STEPS = ['bare', 'bridge', 'worker-connected', 'worker-running', 'node-agent'] as const;
type Step = (typeof STEPS)[number];
/** The probes' own steps: the node agent is a separate process, measured from outside. */
type ProbeStep = Exclude<Step, 'node-agent'>;

/** What the bridge alone needs: the options @temporalio/worker 1.24 passes it for a plain connection. */
const RUNTIME_OPTIONS = {
  logExporter: { type: 'console', filter: 'ERROR,temporalio_sdk_core=WARN,temporalio_client=WARN', format: null },
  telemetry: { metricPrefix: 'temporal_', attachServiceName: true },
  metricsExporter: null,
  workerHeartbeatIntervalMillis: 60_000,
};
const clientOptions = (address: string) => ({
  targetUrl: `http://${address}`,
  clientName: 'temporal-typescript',
  clientVersion: '1.24.0',
  tls: null,
  httpConnectProxy: null,
  dnsLoadBalancingConfig: null,
  grpcCompression: { codec: 'gzip' },
  headers: null,
  apiKey: null,
  disableErrorCodeMetricTags: false,
  payloadsWarnSize: 524288,
  memoWarnSize: 2048,
});

interface BridgeNative {
  newRuntime(options: unknown): unknown;
  newClient(runtime: unknown, options: unknown): Promise<unknown>;
}

/** What the probe holds on to, so that nothing it connected is collected. */
const held: unknown[] = [];

async function load(step: ProbeStep, address: string): Promise<void> {
  if (step === 'bridge') {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the bridge alone, without the SDK's JavaScript
    const { native } = require('@temporalio/core-bridge') as { native: BridgeNative };
    const runtime = native.newRuntime(RUNTIME_OPTIONS);
    held.push(runtime, await native.newClient(runtime, clientOptions(address)));
  } else if (step !== 'bare') {
    const { NativeConnection, Worker } = await import('@temporalio/worker');
    const connection = await NativeConnection.connect({ address });
    held.push(connection);
    if (step === 'worker-running') {
      const worker = await Worker.create({ connection, taskQueue: 'floor', activities: { noop: async () => 1 } });
      void worker.run();
    }
  }
}

function statusMiB(pid: number | 'self' = 'self'): string {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Math.round(Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1]) / 1024);
  const threads = /^Threads:\s+(\d+)/m.exec(status)?.[1];
  return `RSS ${field('VmRSS')} MiB (anon ${field('RssAnon')}, file ${field('RssFile')}), ${threads} threads`;
}

const mib = (bytes: number) => (bytes / 1024 ** 2).toFixed(1);

/** The heap figures of a line: the main thread's heap in use, external, array buffers (MiB), modules loaded. */
function heapText(usage: { heapUsed: number; external: number; arrayBuffers: number }, modules: number): string {
  return `heap ${mib(usage.heapUsed)}, external ${mib(usage.external)}, array buffers ${mib(usage.arrayBuffers)} MiB, ${modules} modules`;
}

async function probe(step: ProbeStep, address: string, settleMs: number): Promise<void> {
  await load(step, address);
  await new Promise((resolve) => setTimeout(resolve, settleMs));
  const heap = heapText(process.memoryUsage(), Object.keys(require.cache).length);
  process.stdout.write(`${step.padEnd(18)} ${statusMiB()}; ${heap}\n`);
  process.exit(0);
}

/**
 * The real node agent, idle: a controller (to run its node record, as in a cluster; not measured) and the agent on
 * the dev server, both with the heap probe (test/bench/heap-probe.ts), read once the agent has been ready settleMs.
 */
async function nodeAgent(address: string, settleMs: number, snapshots?: string): Promise<void> {
  const { TestCluster } = await import('../support/cluster');
  const { probeMemory, probeSnapshot, withHeapProbe } = await import('./heap-probe');
  const probeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-floor-probe-'));
  const saved = { ...process.env };
  Object.assign(process.env, withHeapProbe(process.env, probeDir), {
    DURABLE_CSI_TEST_TEMPORAL: address,
    DURABLE_CSI_TEST_TEMPORAL_CONFIG: JSON.stringify({ address, namespace: 'default' }),
  });
  const cluster = new TestCluster('floor', { logLevel: 'info' });
  try {
    await cluster.startController();
    const agent = await cluster.startNode('node-a');
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    const pid = agent.child.pid ?? 0;
    const memory = await probeMemory(probeDir, pid);
    process.stdout.write(`${'node-agent'.padEnd(18)} ${statusMiB(pid)}; ${heapText(memory, memory.modules)}\n`);
    if (snapshots) {
      for (const file of await probeSnapshot(probeDir, pid, 'idle')) {
        const kept = path.join(snapshots, `node-agent-${path.basename(file)}`);
        fs.copyFileSync(file, kept);
        process.stdout.write(`  heap snapshot: ${kept}\n`);
      }
    }
  } finally {
    await cluster.teardown();
    process.env = saved;
    fs.rmSync(probeDir, { recursive: true, force: true });
  }
}

interface FloorOptions {
  settle: number;
  steps: Step[];
  snapshots?: string;
}

async function parseOptions(argv: string[]): Promise<FloorOptions> {
  const { Command } = await import('commander');
  const { integer } = await import('../support/option-parsers');
  const steps = (text: string) =>
    text.split(',').map((step) => {
      if (!(STEPS as readonly string[]).includes(step))
        throw new Error(`--steps: ${step} is none of ${STEPS.join(', ')}`);
      return step as Step;
    });
  return new Command('floor')
    .option('--settle <seconds>', 'wait before each reading', integer(0), 5)
    .option('--steps <list>', `comma-separated, of ${STEPS.join(', ')}`, steps, [...STEPS])
    .option('--snapshots <dir>', "write a heap snapshot of the idle node agent's main thread into dir")
    .parse(argv)
    .opts<FloorOptions>();
}

async function main(): Promise<void> {
  // Imported here, not at the top: the probes run this file too, and must load nothing but their step.
  const options = await parseOptions(process.argv);
  const { withAgentRuntimeEnv } = await import('../../agent/process-tuning');
  const { startDevServer } = await import('../../temporal-dev/dev-server');
  const { findFreePort } = await import('../../temporal-dev/free-port');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-floor-'));
  const server = await startDevServer({ dataDir, port: await findFreePort(), headless: true });
  try {
    for (const step of options.steps) {
      if (step === 'node-agent') {
        await nodeAgent(server.address, options.settle * 1000, options.snapshots && path.resolve(options.snapshots));
        continue;
      }
      const output = execFileSync(
        process.execPath,
        [__filename, '--probe', step, server.address, String(options.settle * 1000)],
        { env: withAgentRuntimeEnv(process.env), stdio: ['ignore', 'pipe', 'ignore'], encoding: 'utf8' },
      );
      process.stdout.write(output);
    }
  } finally {
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

const at = process.argv.indexOf('--probe');
const run =
  at >= 0
    ? probe(process.argv[at + 1] as ProbeStep, process.argv[at + 2] ?? '', Number(process.argv[at + 3] ?? 5000))
    : main();
run.catch((error: unknown) => {
  process.stderr.write(`floor: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
