import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { temporal as temporalApi } from '@temporalio/proto';
import { Command } from 'commander';
import { nodeRecordsQuery } from '../../../node-records/reads';
import { spawnCli, stopChild } from '../../../agent/spawn-cli';
import { waitUntilReady } from '../../../agent/wait-ready';
import { createWorkflowId, deleteWorkflowId, nodeRecordWorkflowId } from '../../../common/names';
import { parseDuration } from '../../../common/duration';
import { connectCsi } from '../../../csi/client';
import { startDevServer } from '../../../temporal-dev/dev-server';
import { findFreePort } from '../../../temporal-dev/free-port';
import { findProjectRoot } from '../../../common/project-root';
import { createRequest, createVolume, deleteVolume, MiB, onNode, retryLikeCo } from '../../support/csi-requests';
import { runPool, summarize } from '../stats';
import { scrapeCounters, serverWork, type Counters } from '../server-metrics';
import { ProdTemporal } from '../../temporal-prod/prod-temporal';
import { cpuMs, difference, memoryMiB, postmasterPid, processTree } from './proc';
import { runChurn, startHost, type Host } from './churn';
import { printChurnTable, printScaleTable, type ScaleRow } from './scale-report';

/**
 * `npm run bench:scale`: the same controller and dev server with 1, 100, 1,000 (and more) nodes, simulated by
 * virtual node agents (virtual-nodes.ts) that keep their records and poll their own task queues as real agents do.
 * Per node count: create/delete latency at concurrency 1 and 8, history per operation, the records' own traffic
 * while idle, CPU and memory. The point: per-operation cost must not grow with the cluster.
 */
const NODES_PER_HOST = 250;
/** The nodes that crash in --churn run in small hosts of their own, so that a SIGKILL takes down only them. */
const CRASH_HOST_SIZE = 10;

/**
 * Stops the processes of the run in progress (its server, agents' hosts and controller) and removes its files: on
 * its end, and on SIGTERM or SIGINT, which would otherwise leave them running (the `finally` of a run does not run
 * when a signal ends the process).
 */
let stopRun: (() => Promise<void>) | undefined;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    process.stderr.write(`bench:scale: ${signal}, stopping the run's processes\n`);
    void (stopRun?.() ?? Promise.resolve()).finally(() => process.exit(1));
  });
}

async function main(): Promise<void> {
  const program = new Command('bench:scale')
    .option('--nodes <list>', 'node counts', '1,100,1000')
    .option('--ops <n>', 'creates (and as many deletes) per concurrency level', '40')
    .option('--idle <duration>', 'idle window measuring the records’ own traffic', '30s')
    .option(
      '--dynamic-config <key=value...>',
      "more of the server's dynamic config (e.g. matching.numTaskqueueReadPartitions=1; docs/scale.md, sizing)",
      [],
    )
    .option('--server <kind>', 'dev (the Temporal CLI dev server) or prod (temporal-server on PostgreSQL)', 'dev')
    .option('--churn', 'beyond one node, also a rolling restart of every agent and 1% of nodes crashing (churn.ts)')
    .option('--down <duration>', 'how long the crashed nodes stay down in --churn', '90s')
    .option(
      '--wave-every <duration>',
      'the shortest wave of the rolling restart in --churn (0s: once live again)',
      '0s',
    )
    .option(
      '--hosts-nice <n>',
      "the virtual node hosts' niceness: in a cluster every agent has a machine of its own, here they share the " +
        "server's cores, and at 5,000 nodes they would take most of them (docs/scale.md)",
      '0',
    )
    .option(
      '--no-pod-watch',
      "in --churn, leave a crashed agent to its presence timeout instead of playing the controller's agent Pod watch",
    )
    .option(
      '--controller-profile <dir>',
      "the controller's CPU profile (node --cpu-prof), written to the directory when it stops: who spends what",
    )
    .option('--report <file>', 'JSON report', path.join(findProjectRoot(), 'test-artifacts', 'bench-scale.json'));
  program.parse(process.argv);
  const flags = program.opts<{
    nodes: string;
    ops: string;
    idle: string;
    report: string;
    dynamicConfig: string[];
    churn?: boolean;
    podWatch: boolean;
    hostsNice: string;
    down: string;
    waveEvery: string;
    server: string;
    controllerProfile?: string;
  }>();
  if (flags.server !== 'dev' && flags.server !== 'prod') throw new Error(`--server ${flags.server}: dev or prod`);
  const serverKind = flags.server;
  if (!/^\d+$/.test(flags.hostsNice) || Number(flags.hostsNice) > 19)
    throw new Error(`--hosts-nice ${flags.hostsNice}: a niceness from 0 to 19`);
  const extraConfig = flags.dynamicConfig.map((setting) => {
    if (!/^[\w.]+=\S+$/.test(setting)) throw new Error(`--dynamic-config "${setting}" is not KEY=VALUE`);
    return setting;
  });
  const counts = flags.nodes.split(',').map(Number);
  const rows: ScaleRow[] = [];
  for (const nodes of counts) {
    process.stderr.write(`bench:scale: ${nodes} nodes\n`);
    const churn =
      flags.churn && nodes > 1
        ? {
            downMs: parseDuration(flags.down),
            waveEveryMs: parseDuration(flags.waveEvery),
            podWatch: flags.podWatch,
          }
        : undefined;
    const profile = flags.controllerProfile && path.resolve(flags.controllerProfile, String(nodes));
    rows.push(
      await measureAt(
        nodes,
        Number(flags.ops),
        parseDuration(flags.idle),
        extraConfig,
        serverKind,
        Number(flags.hostsNice),
        churn,
        profile,
      ),
    );
    printScaleTable(rows);
    printChurnTable(rows);
  }
  fs.mkdirSync(path.dirname(flags.report), { recursive: true });
  fs.writeFileSync(flags.report, JSON.stringify(rows, null, 2));
  process.stdout.write(`report: ${flags.report}\n`);
}

async function measureAt(
  nodes: number,
  ops: number,
  idleMs: number,
  extraConfig: string[],
  serverKind: 'dev' | 'prod',
  hostsNice: number,
  churnTimes?: { downMs: number; waveEveryMs: number; podWatch: boolean },
  profileDir?: string,
): Promise<ScaleRow> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dscale-'));
  // Each node holds one long poll; the default limit of 1,200 concurrent polls per namespace is below 1,000
  // nodes plus the controller's polls (the same setting a production cluster of that size needs).
  const server = await startServer(serverKind, path.join(root, 'temporal'), [
    `frontend.namespaceCount=${Math.max(1200, 2 * nodes + 200)}`,
    ...extraConfig,
  ]);
  const driverName = `scale-${nodes}.bench.durable-csi.io`;
  const hosts: Host[] = [];
  const crashHosts: Host[] = [];
  let controller: ChildProcess | undefined;
  const connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection });
  let stopped: Promise<void> | undefined;
  stopRun = () =>
    (stopped ??= (async () => {
      await Promise.all([...hosts, ...crashHosts].map((host) => stopChild(host.child, 15_000)));
      if (controller) await stopChild(controller);
      await connection.close();
      await server.stop();
      fs.rmSync(root, { recursive: true, force: true });
    })());
  try {
    const started = Date.now();
    const crashing = churnTimes === undefined ? 0 : Math.max(1, Math.round(nodes / 100));
    const steady = nodes - crashing;
    for (let first = 0; first < steady; first += NODES_PER_HOST) {
      hosts.push(
        await startHost(server.address, driverName, root, first, Math.min(NODES_PER_HOST, steady - first), hostsNice),
      );
    }
    for (let first = steady; first < nodes; first += CRASH_HOST_SIZE) {
      crashHosts.push(
        await startHost(server.address, driverName, root, first, Math.min(CRASH_HOST_SIZE, nodes - first), hostsNice),
      );
    }
    const endpoint = `unix://${path.join(root, 'controller.sock')}`;
    controller = spawnCli(
      ['controller', '--endpoint', endpoint, '--driver-name', driverName, '--temporal-address', server.address],
      path.join(root, 'controller.log'),
      process.env,
      profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
    );
    await waitUntilReady(endpoint, 60_000);
    let lastReport = 0;
    await waitFor(
      async () => {
        const live = Number((await client.workflow.count(nodeRecordsQuery(driverName, 'live'))).count);
        if (Date.now() - lastReport > 15_000) {
          process.stderr.write(
            `bench:scale: ${live}/${nodes} node records live after ${Math.round((Date.now() - started) / 1000)} s\n`,
          );
          lastReport = Date.now();
        }
        return live === nodes;
      },
      120_000 + nodes * 600,
      `${nodes} live node records`,
    );
    const registeredMs = Date.now() - started;
    const pids = {
      temporal: server.pids(),
      controller: controller.pid!,
      hosts: [...hosts, ...crashHosts].map((host) => host.child.pid!),
    };
    const sum = (list: number[]) => list.reduce((total, pid) => total + cpuMs(pid), 0);
    const cpu = () => ({
      temporal: sum(pids.temporal),
      database: sum(server.databasePids()),
      controller: cpuMs(pids.controller),
      hosts: sum(pids.hosts),
    });

    // Idle: only the records' own traffic.
    const sample = Array.from(
      { length: Math.min(nodes, 20) },
      (_, index) => `vnode-${Math.floor((index * nodes) / 20)}`,
    );
    const recordsBefore = await describeRecords(client, driverName, sample);
    const countersBefore = await server.scrape();
    const idleCpuBefore = cpu();
    const idleStart = Date.now();
    await new Promise((resolve) => setTimeout(resolve, idleMs));
    const idleSeconds = (Date.now() - idleStart) / 1000;
    const idleCpu = perSecond(cpu(), idleCpuBefore, idleSeconds);
    const countersIdle = await server.scrape();
    const idleWork = serverWork(countersBefore, countersIdle);
    const rpc = Object.entries(idleWork.rpcs);
    const recordsAfter = await describeRecords(client, driverName, sample);
    const growth = recordsAfter.map((after, index) => after.bytes - (recordsBefore[index]?.bytes ?? 0));
    const recordBytesPerHour = (Math.max(0, ...growth) * 3600) / idleSeconds;

    // Operations, aimed at random nodes with topology (what external-provisioner sends with WaitForFirstConsumer).
    const csi = connectCsi(endpoint);
    const levels: ScaleRow['levels'] = [];
    const created: string[] = [];
    const names: string[] = [];
    const opsCpuBefore = cpu();
    const opsStart = Date.now();
    for (const concurrency of [1, 8]) {
      const ids: string[] = [];
      const createLatencies: number[] = [];
      const deleteLatencies: number[] = [];
      let wall = Date.now();
      await runPool([...Array(ops).keys()], concurrency, async (index) => {
        const name = `scale-c${concurrency}-${index}`;
        const node = `vnode-${Math.floor(Math.random() * nodes)}`;
        const begin = Date.now();
        const answer = await retryLikeCo(() => createVolume(csi, createRequest(name, MiB, onNode(node))));
        createLatencies.push(Date.now() - begin);
        ids.push(answer.volume!.volume_id);
        names.push(name);
      });
      const createWall = Date.now() - wall;
      wall = Date.now();
      await runPool(ids, concurrency, async (volumeId) => {
        const begin = Date.now();
        await retryLikeCo(() => deleteVolume(csi, volumeId));
        deleteLatencies.push(Date.now() - begin);
      });
      levels.push({
        concurrency,
        create: summarize(createLatencies, createWall),
        delete: summarize(deleteLatencies, Date.now() - wall),
      });
      created.push(...ids);
    }
    const opsSeconds = (Date.now() - opsStart) / 1000;
    const opsWork = serverWork(countersIdle, await server.scrape());
    const opsCpu = difference(new Map(Object.entries(cpu())), new Map(Object.entries(opsCpuBefore)));
    const totalOps = created.length * 2;
    const cpuPerOp = (key: 'temporal' | 'database' | 'controller') => {
      const used = opsCpu.get(key) ?? 0;
      return { raw: used / totalOps, net: Math.max(0, used - idleCpu[key] * 1000 * opsSeconds) / totalOps };
    };
    // Less what the idle background (records, polls) did over the same time; the idle window just before is its
    // measure. What remains is what the operations themselves cost.
    const beyondIdle = (total: number, idlePerSecond: number) =>
      Math.max(0, total - idlePerSecond * opsSeconds) / totalOps;
    const idleRpcPerSecond = rpc.reduce((sum, [, count]) => sum + count, 0) / idleSeconds;
    const serverPerOp = {
      rpcs: beyondIdle(
        Object.values(opsWork.rpcs).reduce((sum, count) => sum + count, 0),
        idleRpcPerSecond,
      ),
      writes: beyondIdle(opsWork.persistenceWrites, idleWork.persistenceWrites / idleSeconds),
      visibilityWrites: beyondIdle(opsWork.visibilityWrites, idleWork.visibilityWrites / idleSeconds),
    };

    const histories = await Promise.all([
      ...names.slice(0, 10).map((name) => historySize(client, createWorkflowId(driverName, name))),
      ...created.slice(0, 10).map((volumeId) => historySize(client, deleteWorkflowId(driverName, volumeId))),
    ]);
    const memory = {
      temporal: pids.temporal.map(memoryMiB).reduce((a, b) => ({ rss: a.rss + b.rss, peak: a.peak + b.peak })),
      controller: memoryMiB(pids.controller),
      hostsPeak: Math.max(...[...hosts, ...crashHosts].map((host) => memoryMiB(host.child.pid!).peak)),
    };
    const row: ScaleRow = {
      nodes,
      registeredMs,
      levels,
      historyPerOp: {
        events: histories.reduce((sum, size) => sum + size.events, 0) / histories.length,
        bytes: histories.reduce((sum, size) => sum + size.bytes, 0) / histories.length,
      },
      idle: {
        rpcPerSecond: Object.fromEntries(rpc.map(([operation, count]) => [operation, count / idleSeconds])),
        cpuPerSecond: idleCpu,
        recordBytesPerHourPerNode: recordBytesPerHour,
        largestRecord: maxOf(recordsAfter),
        writesPerSecond: idleWork.persistenceWrites / idleSeconds,
        writesByOperation: Object.fromEntries(
          Object.entries(idleWork.writes).map(([operation, count]) => [operation, count / idleSeconds]),
        ),
      },
      serverPerOp,
      server: serverKind,
      cpuPerOp: { temporal: cpuPerOp('temporal'), database: cpuPerOp('database'), controller: cpuPerOp('controller') },
      memoryMiB: memory,
    };
    // Printed now: what churn adds comes after these figures (which it would disturb), and may fail on its own.
    printScaleTable([row]);
    row.churn =
      churnTimes === undefined
        ? undefined
        : await runChurn({
            client,
            csi,
            driverName,
            nodes,
            hosts,
            crashHosts,
            startAgain: (host) => startHost(server.address, driverName, root, host.first, host.count, hostsNice),
            ...churnTimes,
            log: (message) => process.stderr.write(`bench:scale: churn: ${message}\n`),
          });
    csi.close();
    return row;
  } finally {
    await stopRun();
    stopRun = undefined;
  }
}

/** The Temporal the benchmark measures: its address, its processes (for CPU and memory) and its counters. */
interface BenchServer {
  address: string;
  /** The server's own processes: one for the dev server, frontend, history, matching and worker for prod. */
  pids(): number[];
  /** PostgreSQL's processes (prod), whose CPU is reported apart. */
  databasePids(): number[];
  /** The Prometheus counters of every server process, summed. */
  scrape(): Promise<Counters>;
  stop(): Promise<void>;
}

/**
 * `dev`: the Temporal CLI's dev server (SQLite, one process). `prod`: the production-style server of
 * test/temporal-prod (temporal-server's four services on PostgreSQL, plain gRPC here), each service with its own
 * Prometheus endpoint. `settings`: dynamic config as KEY=VALUE.
 */
async function startServer(kind: 'dev' | 'prod', dataDir: string, settings: string[]): Promise<BenchServer> {
  if (kind === 'dev') {
    const metricsPort = await findFreePort();
    const dev = await startDevServer({
      dataDir,
      port: await findFreePort(),
      headless: true,
      extraArgs: [
        '--metrics-port',
        String(metricsPort),
        ...settings.flatMap((setting) => ['--dynamic-config-value', setting]),
      ],
    });
    return {
      address: dev.address,
      pids: () => [dev.pid],
      databasePids: () => [],
      scrape: () => scrapeCounters(`http://127.0.0.1:${metricsPort}/metrics`),
      stop: () => dev.stop(),
    };
  }
  const typed = (value: string) => (/^\d+$/.test(value) ? Number(value) : value === 'true' || value);
  const dynamicConfig = Object.fromEntries(
    settings.map((setting) => {
      const [key = '', value = ''] = setting.split('=');
      return [key, value === 'false' ? false : typed(value)];
    }),
  );
  const prod = await ProdTemporal.start({
    dataDir,
    tls: false,
    metrics: true,
    dynamicConfig,
    progress: (message) => process.stderr.write(`bench:scale: temporal-server: ${message}\n`),
  });
  return {
    address: prod.address,
    pids: () => Object.values(prod.services).flatMap((service) => (service.pid ? [service.pid] : [])),
    databasePids: () => processTree(postmasterPid(prod.postgres.dir)),
    scrape: async () => {
      const summed: Counters = new Map();
      for (const counters of await Promise.all(prod.metricsUrls.map(scrapeCounters)))
        for (const [key, value] of counters) summed.set(key, (summed.get(key) ?? 0) + value);
      return summed;
    },
    stop: () => prod.stop(),
  };
}

async function describeRecords(client: Client, driverName: string, nodeIds: string[]) {
  return Promise.all(
    nodeIds.map(async (nodeId) => {
      const info = (await client.workflow.getHandle(nodeRecordWorkflowId(driverName, nodeId)).describe()).raw
        .workflowExecutionInfo;
      return { nodeId, events: Number(info?.historyLength ?? 0), bytes: Number(info?.historySizeBytes ?? 0) };
    }),
  );
}

function maxOf(records: { events: number; bytes: number }[]) {
  return { events: Math.max(0, ...records.map((r) => r.events)), bytes: Math.max(0, ...records.map((r) => r.bytes)) };
}

async function historySize(client: Client, workflowId: string) {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  return {
    events: history.events?.length ?? 0,
    bytes: temporalApi.api.history.v1.History.encode(history).finish().length,
  };
}

function perSecond<T extends Record<string, number>>(after: T, before: T, seconds: number): T {
  return Object.fromEntries(
    Object.entries(after).map(([key, value]) => [key, (value - (before[key] ?? 0)) / 1000 / seconds]),
  ) as T;
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
