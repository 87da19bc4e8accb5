/**
 * The benchmark: CreateVolume/DeleteVolume through a real driver (controller + 3 node agents, real Temporal dev
 * server) against the same calls on a DirBackend directly, with what each operation cost Temporal and each
 * process, and a drain of deletions that waited for a stopped node. `npm run bench -- --ops 100 --concurrency 1,8`.
 */
import { Command, Option } from 'commander';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseQuantity } from '../../common/quantity';
import { DirBackend } from '../../storage/dir/dir-backend';
import { DEV_SERVER_DYNAMIC_CONFIG, startDevServer, type DynamicConfig } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';
import { findProjectRoot } from '../../common/project-root';
import { TestCluster } from '../support/cluster';
import { startRunTemporal } from '../support/run-temporal';
import { runDirectLevel, warmUpDirect } from './direct';
import { runDrain } from './drain';
import { runDurableLevel, warmUpDurable, type DurableTarget } from './durable';
import { idleResident } from './idle';
import { runLifecycles } from './lifecycles';
import { runSupervisor } from './supervisor';
import { messageOf } from './measure';
import { CostMeter } from './phase-cost';
import { ProcessWatch } from './process-usage';
import { formatReport, machineInfo, priceOfDurability, writeJson, type BenchReport, type LevelResult } from './report';
import { integer } from '../support/option-parsers';

interface Options {
  ops: number;
  concurrency: number[];
  nodes: number;
  capacity: string;
  callWait: string;
  rpcTimeout: number;
  warmup: number;
  drain: number;
  serverConfig: 'tuned' | 'stock';
  dynamicConfig: string[];
  out: string;
  keep: boolean;
  temporal: 'dev' | 'prod';
  topology: 'node' | 'none';
  idleSettle: number;
  profile?: string;
  lifecycles: number;
  lifecycleBatch: number;
  supervisorOps: number;
}

const positiveInt = integer(1);

function parseOptions(argv: string[]): Options {
  const program = new Command('bench')
    .option('--ops <n>', 'CreateVolume calls per concurrency level (each then deleted)', positiveInt, 200)
    .option(
      '--concurrency <list>',
      'comma-separated calls in flight',
      (text) => text.split(',').map(positiveInt),
      [1, 8, 32],
    )
    .option('--nodes <n>', 'node agents', positiveInt, 3)
    .option('--capacity <size>', 'pool capacity of each node', '1Ti')
    .option('--call-wait <duration>', "controller's --call-wait", '30s')
    .option('--rpc-timeout <ms>', 'gRPC deadline of each attempt', positiveInt, 60_000)
    .option('--warmup <n>', 'unmeasured create+delete pairs before the first level', integer(0), 3)
    .option(
      '--lifecycles <n>',
      'create+delete lifecycles at concurrency 5 after the levels, sampling RSS per batch (0: skip)',
      integer(0),
      2000,
    )
    .option('--lifecycle-batch <n>', 'lifecycles between two RSS samples', positiveInt, 250)
    .option(
      '--supervisor-ops <n>',
      'creates (then deletes) through a `durable-csi dev` stack, measuring its supervisor (0: skip)',
      integer(0),
      100,
    )
    .option('--drain <n>', 'deletions that wait for a stopped node, then drain (0: skip)', integer(0), 1000)
    .option(
      '--server-config <which>',
      "dev server dynamic config: 'tuned' (what `npm run dev` and the tests run) or 'stock' (the server's defaults)",
      (text) => {
        if (text !== 'tuned' && text !== 'stock') throw new Error(`--server-config: tuned or stock, not ${text}`);
        return text;
      },
      'tuned',
    )
    .option(
      '--dynamic-config <key=value>',
      'one more dynamic config value (JSON value), repeatable',
      (text: string, previous: string[]) => [...previous, text],
      [],
    )
    .option('--out <file>', 'JSON report', path.join(findProjectRoot(), 'test-artifacts', 'bench.json'))
    .option('--keep', 'keep the Temporal data, pools and logs (printed) instead of removing them', false)
    .addOption(
      new Option(
        '--topology <shape>',
        "'node': each create names one node in a requisite topology (round robin), as external-provisioner does " +
          "with WaitForFirstConsumer; 'none': the controller places every volume",
      )
        .choices(['node', 'none'])
        .default('node'),
    )
    .option('--profile <dir>', "write each driver process's CPU profiles (node --cpu-prof, every thread) into dir")
    .option(
      '--idle-settle <ms>',
      'wait before reading the idle RSS, after start and after the levels',
      integer(0),
      5000,
    )
    .addOption(
      new Option('--temporal <server>', 'the dev server, or the production-style one (docs/temporal-cluster.md)')
        .choices(['dev', 'prod'])
        .default('dev'),
    )
    .parse(argv);
  return program.opts<Options>();
}

const progress = (message: string) => process.stderr.write(`[bench ${new Date().toISOString()}] ${message}\n`);

function checkLevel(kind: string, level: LevelResult, problems: string[]): void {
  for (const op of ['create', 'delete'] as const) {
    if (level[op].failures > 0) {
      problems.push(
        `${kind} conc ${level.concurrency}: ${level[op].failures} ${op} calls failed, e.g. ` +
          level[op].failureSamples.join(' | '),
      );
    }
  }
  if (level.leftovers.length > 0) {
    problems.push(
      `${kind} conc ${level.concurrency}: pools not empty after the deletes (leak): ` +
        `${level.leftovers.slice(0, 10).join(', ')}${level.leftovers.length > 10 ? ', ...' : ''}`,
    );
  }
}

function dynamicConfig(options: Options): DynamicConfig {
  const config: DynamicConfig = options.serverConfig === 'tuned' ? { ...DEV_SERVER_DYNAMIC_CONFIG } : {};
  for (const entry of options.dynamicConfig) {
    const at = entry.indexOf('=');
    if (at <= 0) throw new Error(`--dynamic-config ${entry}: expected key=value`);
    config[entry.slice(0, at)] = JSON.parse(entry.slice(at + 1)) as number | boolean | string;
  }
  return config;
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv);
  const runId = Date.now().toString(36);
  const report: BenchReport = {
    startedAt: new Date().toISOString(),
    loadAverage: { start: os.loadavg()[0] ?? NaN },
    machine: machineInfo(),
    options: { ...options },
    durable: [],
    direct: [],
    priceOfDurability: [],
    ok: false,
    problems: [],
  };
  if (options.keep) process.env.DURABLE_CSI_KEEP_TEST_DATA = '1';

  const cleanups: (() => Promise<void>)[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanUp = () =>
    (cleaning ??= (async () => {
      for (const cleanup of cleanups.reverse()) {
        await cleanup().catch((error: unknown) => progress(`cleanup failed: ${messageOf(error)}`));
      }
    })());
  const onSignal = (signal: NodeJS.Signals) => {
    progress(`${signal}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-bench-temporal-'));
    cleanups.push(async () => {
      if (options.keep) progress(`kept Temporal data in ${dataDir}`);
      else fs.rmSync(dataDir, { recursive: true, force: true });
    });
    let metricsUrl: string | undefined;
    let temporalPid: number | undefined;
    if (options.temporal === 'dev') {
      progress('starting the Temporal dev server');
      const server = await startDevServer({
        dataDir,
        port: await findFreePort(),
        metricsPort: await findFreePort(),
        headless: true,
        dynamicConfig: dynamicConfig(options),
      });
      cleanups.push(() => server.stop());
      process.env.DURABLE_CSI_TEST_TEMPORAL = server.address;
      process.env.DURABLE_CSI_TEST_TEMPORAL_CONFIG = JSON.stringify({
        address: server.address,
        namespace: server.namespace,
      });
      metricsUrl = server.metricsUrl;
      temporalPid = server.pid;
    } else {
      // Its several services are not accounted here: latency, throughput and the driver's processes only.
      const server = await startRunTemporal(options.temporal, dataDir, progress);
      cleanups.push(() => server.stop());
      process.env.DURABLE_CSI_TEST_TEMPORAL = server.config.address;
      process.env.DURABLE_CSI_TEST_TEMPORAL_CONFIG = JSON.stringify(server.config);
    }
    const watch = new ProcessWatch();
    if (temporalPid !== undefined) watch.add({ name: 'temporal', group: 'temporal', pid: temporalPid });
    const meter = new CostMeter(watch, metricsUrl);

    if (options.profile) {
      // Read by the driver's processes (spawned after this); written when each exits at the teardown (cpu-profiler.ts).
      const dir = path.resolve(options.profile);
      fs.mkdirSync(dir, { recursive: true });
      const profiler = path.join(__dirname, 'cpu-profiler.js');
      process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --require ${profiler}`.trim();
      process.env.DURABLE_CSI_PROFILE_DIR = dir;
    }
    const cluster = new TestCluster('bench', { logLevel: 'info' });
    cleanups.push(async () => {
      if (options.keep) progress(`kept pools and logs in ${cluster.root}`);
      await cluster.teardown();
    });
    const nodes = Array.from({ length: options.nodes }, (_, index) => `node-${String.fromCharCode(97 + index)}`);
    progress(`starting ${nodes.length} node agents and a controller (driver ${cluster.driverName})`);
    const agents = await Promise.all(nodes.map((nodeId) => cluster.startNode(nodeId, { capacity: options.capacity })));
    agents.forEach((agent, index) =>
      watch.add({ name: nodes[index] ?? '', group: 'node agents', pid: agent.child.pid ?? 0 }),
    );
    const controller = await cluster.startController('controller', ['--call-wait', options.callWait]);
    watch.add({ name: 'controller', group: 'controller', pid: controller.child.pid ?? 0 });
    const target: DurableTarget = {
      cluster,
      clients: cluster.csi(controller.endpoint),
      nodes,
      rpcTimeoutMs: options.rpcTimeout,
      retryBudgetMs: 300_000,
      topology: options.topology,
    };
    report.idle = { start: await idleResident(watch, options.idleSettle) };

    await warmUpDurable(target, runId, options.warmup);
    // The profiles cover the levels only (cpu-profiler.ts): SIGUSR2 starts them, the next one writes them.
    const toggleProfiles = () => {
      if (options.profile) [controller, ...agents].forEach(({ child }) => child.kill('SIGUSR2'));
    };
    toggleProfiles();
    for (const concurrency of options.concurrency) {
      progress(`durable: ${options.ops} creates then deletes, ${concurrency} in flight`);
      const level = await runDurableLevel(target, meter, runId, concurrency, options.ops);
      report.durable.push(level);
      checkLevel('durable', level, report.problems);
    }
    toggleProfiles();
    report.idle.afterLevels = await idleResident(watch, options.idleSettle);
    if (options.lifecycles > 0) {
      progress(`${options.lifecycles} lifecycles at concurrency 5, RSS every ${options.lifecycleBatch}`);
      const batches = { count: options.lifecycles, batch: options.lifecycleBatch, concurrency: 5 };
      const check = (level: LevelResult) => checkLevel('lifecycles', level, report.problems);
      report.lifecycles = await runLifecycles(target, watch, runId, batches, check, progress);
    }
    if (options.drain > 0) {
      report.drain = await runDrain(target, meter, runId, options.drain, progress);
      report.problems.push(...report.drain.problems);
    }

    const directRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-bench-direct-'));
    cleanups.push(async () => fs.rmSync(directRoot, { recursive: true, force: true }));
    const pool = path.join(directRoot, 'pool');
    const backend = new DirBackend({ pool, capacityBytes: parseQuantity(options.capacity), quota: 'none' });
    await backend.open();
    cleanups.push(() => backend.close());
    await warmUpDirect({ backend, pool }, runId, options.warmup);
    for (const concurrency of options.concurrency) {
      progress(`direct: ${options.ops} creates then deletes, ${concurrency} in flight`);
      const level = await runDirectLevel({ backend, pool }, runId, concurrency, options.ops);
      report.direct.push(level);
      checkLevel('direct', level, report.problems);
    }
    if (options.supervisorOps > 0) {
      const check = (level: LevelResult) => checkLevel('supervisor', level, report.problems);
      const shape = { nodes: options.nodes, ops: options.supervisorOps, concurrency: 5 };
      const settings = { settleMs: options.idleSettle, rpcTimeoutMs: options.rpcTimeout };
      report.supervisor = await runSupervisor({ ...shape, ...settings }, runId, check, progress);
    }
  } catch (error) {
    report.problems.push(`aborted: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    await cleanUp();
  }

  report.loadAverage.end = os.loadavg()[0];
  report.priceOfDurability = priceOfDurability(report.durable, report.direct);
  report.ok = report.problems.length === 0;
  process.stdout.write(`${formatReport(report)}\n`);
  writeJson(options.out, report);
  progress(`wrote ${options.out}`);
  return report.ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
