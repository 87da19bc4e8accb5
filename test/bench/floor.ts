/**
 * The memory floor of a Temporal worker process on this machine (issue 23): `node dist/test/bench/floor.js`. Starts a
 * dev server, then one process per step, each with the agents' runtime settings, and prints its resident memory
 * once it has settled: a bare Node.js; the SDK's native bridge alone (a runtime and a client connected, no SDK
 * JavaScript); `@temporalio/worker` loaded and connected; an activity-only worker running (what a node agent is, without
 * the driver). The node agent's own figure is in `npm run bench`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const STEPS = ['bare', 'bridge', 'worker-connected', 'worker-running'] as const;
type Step = (typeof STEPS)[number];
const SETTLE_MS = 5_000;

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

async function load(step: Step, address: string): Promise<void> {
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

function statusMiB(): string {
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const field = (name: string) => Math.round(Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1]) / 1024);
  const threads = /^Threads:\s+(\d+)/m.exec(status)?.[1];
  return `RSS ${field('VmRSS')} MiB (anon ${field('RssAnon')}, file ${field('RssFile')}), ${threads} threads`;
}

async function probe(step: Step, address: string): Promise<void> {
  await load(step, address);
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  process.stdout.write(`${step.padEnd(18)} ${statusMiB()}\n`);
  process.exit(0);
}

async function main(): Promise<void> {
  // Imported here, not at the top: the probes run this file too, and must load nothing but their step.
  const { withAgentRuntimeEnv } = await import('../../agent/process-tuning');
  const { startDevServer } = await import('../../temporal-dev/dev-server');
  const { findFreePort } = await import('../../temporal-dev/free-port');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-floor-'));
  const server = await startDevServer({ dataDir, port: await findFreePort(), headless: true });
  try {
    for (const step of STEPS) {
      const output = execFileSync(process.execPath, [__filename, '--probe', step, server.address], {
        env: withAgentRuntimeEnv(process.env),
        stdio: ['ignore', 'pipe', 'ignore'],
        encoding: 'utf8',
      });
      process.stdout.write(output);
    }
  } finally {
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

const at = process.argv.indexOf('--probe');
const run = at >= 0 ? probe(process.argv[at + 1] as Step, process.argv[at + 2] ?? '') : main();
run.catch((error: unknown) => {
  process.stderr.write(`floor: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
