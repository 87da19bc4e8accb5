/**
 * The benchmark: CreateVolume/DeleteVolume through a real driver (controller + 3 node agents, real Temporal dev
 * server) against the same calls on a DirBackend directly. `npm run bench -- --ops 100 --concurrency 1,8`.
 */
import { Command, Option } from 'commander';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseQuantity } from '../../common/quantity';
import { DirBackend } from '../../storage/dir-backend';
import { findProjectRoot } from '../../temporal-dev/project-root';
import { TestCluster } from '../support/cluster';
import { startRunTemporal } from '../support/run-temporal';
import { runDirectLevel, warmUpDirect } from './direct';
import { runDurableLevel, warmUpDurable, type DurableTarget } from './durable';
import { messageOf } from './measure';
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
  out: string;
  keep: boolean;
  temporal: 'dev' | 'prod';
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
    .option('--out <file>', 'JSON report', path.join(findProjectRoot(), 'test-artifacts', 'bench.json'))
    .option('--keep', 'keep the Temporal data, pools and logs (printed) instead of removing them', false)
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

async function main(): Promise<number> {
  const options = parseOptions(process.argv);
  const runId = Date.now().toString(36);
  const report: BenchReport = {
    startedAt: new Date().toISOString(),
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
    const server = await startRunTemporal(options.temporal, dataDir, progress);
    cleanups.push(() => server.stop());
    process.env.DURABLE_CSI_TEST_TEMPORAL = server.config.address;
    process.env.DURABLE_CSI_TEST_TEMPORAL_CONFIG = JSON.stringify(server.config);

    const cluster = new TestCluster('bench');
    cleanups.push(async () => {
      if (options.keep) progress(`kept pools and logs in ${cluster.root}`);
      await cluster.teardown();
    });
    const nodes = Array.from({ length: options.nodes }, (_, index) => `node-${String.fromCharCode(97 + index)}`);
    progress(`starting ${nodes.length} node agents and a controller (driver ${cluster.driverName})`);
    await Promise.all(nodes.map((nodeId) => cluster.startNode(nodeId, { capacity: options.capacity })));
    const controller = await cluster.startController('controller', ['--call-wait', options.callWait]);
    const target: DurableTarget = {
      cluster,
      clients: cluster.csi(controller.endpoint),
      nodes,
      rpcTimeoutMs: options.rpcTimeout,
      retryBudgetMs: 300_000,
    };

    await warmUpDurable(target, runId, options.warmup);
    for (const concurrency of options.concurrency) {
      progress(`durable: ${options.ops} creates then deletes, ${concurrency} in flight`);
      const level = await runDurableLevel(target, runId, concurrency, options.ops);
      report.durable.push(level);
      checkLevel('durable', level, report.problems);
    }

    const directRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-bench-direct-'));
    cleanups.push(async () => fs.rmSync(directRoot, { recursive: true, force: true }));
    const pool = path.join(directRoot, 'pool');
    const backend = new DirBackend({ pool, capacityBytes: parseQuantity(options.capacity) });
    await backend.open();
    cleanups.push(() => backend.close());
    await warmUpDirect({ backend, pool }, runId, options.warmup);
    for (const concurrency of options.concurrency) {
      progress(`direct: ${options.ops} creates then deletes, ${concurrency} in flight`);
      const level = await runDirectLevel({ backend, pool }, runId, concurrency, options.ops);
      report.direct.push(level);
      checkLevel('direct', level, report.problems);
    }
  } catch (error) {
    report.problems.push(`aborted: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    await cleanUp();
  }

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
