/**
 * `npm run bench:snapshots` (issue 22): snapshot and restore times of a 1 GiB loop volume, on a pool filesystem with
 * reflinks (XFS, `-m reflink=1`) and on one without (ext4), and the blocks each copy takes. Real processes: its own
 * Temporal dev server, a controller with --snapshots and one node agent (loop backend) per pool; each pool
 * filesystem is a sparse image on a loop device the benchmark attaches, formats and mounts in a temporary
 * directory, and unmounts and detaches at the end, failed or not. Needs root. `-- --rounds 3`.
 */
import { Command } from 'commander';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDevServer } from '../../../temporal-dev/dev-server';
import { findFreePort } from '../../../temporal-dev/free-port';
import { findProjectRoot } from '../../../common/project-root';
import { GiB, MiB } from '../../support/csi-requests';
import { readNodeRecord } from '../../../node-records/reads';
import { TestCluster } from '../../support/cluster';
import { integer } from '../../support/option-parsers';
import { percentile } from '../stats';
import { table } from '../table';
import { makePoolFs, missingRequirements, type PoolFsKind } from './host';
import { measurePool, VOLUME_BYTES, type PoolResult, type Round } from './rounds';

/** Each pool filesystem's image (sparse): the source, a snapshot and a restore fit even as full copies. */
const POOL_FS_BYTES = 4 * GiB;
/** The node's --capacity: the three 1 GiB reservations of a round, with room to spare on the 4 GiB filesystem. */
const POOL_CAPACITY = '3584Mi';
const KINDS: PoolFsKind[] = ['xfs', 'ext4'];
const VOLUME_MIB = VOLUME_BYTES / MiB;

const progress = (message: string) =>
  process.stderr.write(`[bench:snapshots ${new Date().toISOString()}] ${message}\n`);

interface Options {
  rounds: number;
  rpcTimeout: number;
  out: string;
}

function parseOptions(argv: string[]): Options {
  return new Command('bench:snapshots')
    .option('--rounds <n>', 'snapshot + restore rounds per pool filesystem', integer(1), 3)
    .option('--rpc-timeout <ms>', 'gRPC deadline of each attempt', integer(1), 180_000)
    .option('--out <file>', 'JSON report', path.join(findProjectRoot(), 'test-artifacts', 'bench-snapshots.json'))
    .parse(argv)
    .opts<Options>();
}

function spread(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const fmt = (value: number) => (Number.isFinite(value) ? value.toFixed(0) : '-');
  return `${fmt(percentile(sorted, 50))} / ${fmt(sorted[0] ?? NaN)} / ${fmt(sorted[sorted.length - 1] ?? NaN)}`;
}

function mib(values: number[]): string {
  const unique = [...new Set(values.map((value) => (value / MiB).toFixed(1)))];
  return unique.join(', ');
}

function report(results: PoolResult[]): string {
  const of = (result: PoolResult, pick: (round: Round) => number) => result.rounds.map(pick);
  return table(
    [
      'filesystem',
      'reflink',
      'snapshot ms p50/min/max',
      'restore ms p50/min/max',
      'copy blocks MiB (snap, restore)',
      'snap shared MiB',
      'pool fs +MiB (snap, restore)',
    ],
    results.map((result) => [
      result.kind,
      result.reflink ? 'yes' : 'no',
      spread(of(result, (round) => round.snapshotMs)),
      spread(of(result, (round) => round.restoreMs)),
      `${mib(of(result, (round) => round.snapshotBlockBytes))}; ${mib(of(result, (round) => round.restoreBlockBytes))}`,
      mib(of(result, (round) => round.snapshotSharedBytes)),
      `${mib(of(result, (round) => round.snapshotFsBytes))}; ${mib(of(result, (round) => round.restoreFsBytes))}`,
    ]),
  );
}

const each = (results: PoolResult[], pick: (result: PoolResult) => number) =>
  results.map((result) => `${result.kind} ${pick(result).toFixed(0)} ms`).join(', ');

async function main(): Promise<number> {
  const options = parseOptions(process.argv);
  const missing = missingRequirements();
  if (missing.length > 0) {
    process.stderr.write(`bench:snapshots cannot run here; it needs:\n${missing.map((m) => `  - ${m}\n`).join('')}`);
    return 2;
  }
  const runId = Date.now().toString(36);
  const startedAt = new Date().toISOString();
  const cleanups: (() => Promise<void>)[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanUp = () =>
    (cleaning ??= (async () => {
      for (const cleanup of cleanups.reverse()) {
        await cleanup().catch((error: unknown) => progress(`cleanup failed: ${String(error)}`));
      }
    })());
  const onSignal = (signal: NodeJS.Signals) => {
    progress(`${signal}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  let failed = true;
  try {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-snapbench-'));
    cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    const pools = [];
    for (const kind of KINDS) {
      progress(`making the ${kind} pool filesystem (${POOL_FS_BYTES / GiB} GiB sparse image on a loop device)`);
      pools.push(await makePoolFs(dir, kind, POOL_FS_BYTES, cleanups));
    }
    if (!pools[0]?.reflink) throw new Error('the XFS made with -m reflink=1 does not reflink (cp --reflink=always)');

    progress('starting the Temporal dev server');
    const server = await startDevServer({
      dataDir: path.join(dir, 'temporal'),
      port: await findFreePort(),
      headless: true,
    });
    cleanups.push(() => server.stop());
    process.env.DURABLE_CSI_TEST_TEMPORAL_CONFIG = JSON.stringify({
      address: server.address,
      namespace: server.namespace,
    });

    const started = new TestCluster('snapbench', { logLevel: 'info' });
    cleanups.push(async () => {
      if (failed) {
        process.env.DURABLE_CSI_KEEP_TEST_DATA = '1';
        progress(`kept the driver's logs in ${path.join(started.root, 'logs')}`);
      }
      await started.teardown();
    });
    const nodeId = (kind: PoolFsKind) => `snap-${kind}`;
    progress(`starting ${pools.length} node agents (loop backend) and a controller with --snapshots`);
    for (const poolFs of pools) {
      // The later --pool wins over the cluster's own.
      const extra = ['--pool', poolFs.pool];
      await started.startNode(nodeId(poolFs.kind), { backend: 'loop', capacity: POOL_CAPACITY, extra });
    }
    // A call waits for its copy instead of answering ABORTED and being retried: the time is the copy's.
    const controller = await started.startController('controller', ['--snapshots', '--call-wait', '120s']);
    const clients = started.csi(controller.endpoint);

    const temporal = await started.temporal();
    const awaitRoom = (node: string) => async (bytes: number) => {
      const since = Date.now();
      for (let reads = 0; ; reads++) {
        const record = await readNodeRecord(temporal, started.driverName, node);
        if ((record?.node?.availableBytes ?? 0) >= bytes) return reads === 0 ? 0 : Date.now() - since;
        if (Date.now() - since > 60_000) throw new Error(`the record of ${node} never showed ${bytes} bytes free`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    };
    const results: PoolResult[] = [];
    for (const poolFs of pools) {
      const node = nodeId(poolFs.kind);
      const target = {
        clients,
        nodeId: node,
        poolFs,
        rpcTimeoutMs: options.rpcTimeout,
        runId,
        progress,
        awaitRoom: awaitRoom(node),
      };
      results.push(await measurePool(target, options.rounds));
    }
    process.stdout.write(
      `\nbench:snapshots: ${VOLUME_MIB} MiB raw block loop volume, ${options.rounds} rounds per filesystem, ` +
        `load average ${os
          .loadavg()
          .map((load) => load.toFixed(2))
          .join(' ')}\n` +
        `${report(results)}\n` +
        `CreateVolume of the empty source (no copy): ${each(results, (r) => r.createMs)}; ` +
        `fill (write ${VOLUME_MIB} MiB + sync): ${each(results, (r) => r.fillMs)}\n`,
    );
    fs.mkdirSync(path.dirname(options.out), { recursive: true });
    const machine = {
      cpus: os.cpus().length,
      cpu: os.cpus()[0]?.model,
      kernel: os.release(),
      loadAverage: os.loadavg(),
    };
    fs.writeFileSync(options.out, JSON.stringify({ startedAt, machine, options, results }, null, 2));
    process.stdout.write(`report: ${options.out}\n`);
    failed = false;
    return 0;
  } catch (error) {
    progress(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  } finally {
    await cleanUp();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench:snapshots: ${String(error)}\n`);
    process.exit(1);
  },
);
