import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
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
import { scrapeCounters, serverWork } from '../server-metrics';
import { cpuMs, difference, memoryMiB } from './proc';
import { printScaleTable, type ScaleRow } from './scale-report';

/**
 * `npm run bench:scale`: the same controller and dev server with 1, 100, 1,000 (and more) nodes, simulated by
 * virtual node agents (virtual-nodes.ts) that keep their records and poll their own task queues as real agents do.
 * Per node count: create/delete latency at concurrency 1 and 8, history per operation, the records' own traffic
 * while idle, CPU and memory. The point: per-operation cost must not grow with the cluster.
 */
const NODES_PER_HOST = 250;

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
    .option('--report <file>', 'JSON report', path.join(findProjectRoot(), 'test-artifacts', 'bench-scale.json'));
  program.parse(process.argv);
  const flags = program.opts<{ nodes: string; ops: string; idle: string; report: string; dynamicConfig: string[] }>();
  const extraConfig = flags.dynamicConfig.map((setting) => {
    if (!/^[\w.]+=\S+$/.test(setting)) throw new Error(`--dynamic-config "${setting}" is not KEY=VALUE`);
    return setting;
  });
  const counts = flags.nodes.split(',').map(Number);
  const rows: ScaleRow[] = [];
  for (const nodes of counts) {
    process.stderr.write(`bench:scale: ${nodes} nodes\n`);
    rows.push(await measureAt(nodes, Number(flags.ops), parseDuration(flags.idle), extraConfig));
    printScaleTable(rows);
  }
  fs.mkdirSync(path.dirname(flags.report), { recursive: true });
  fs.writeFileSync(flags.report, JSON.stringify(rows, null, 2));
  process.stdout.write(`report: ${flags.report}\n`);
}

async function measureAt(nodes: number, ops: number, idleMs: number, extraConfig: string[]): Promise<ScaleRow> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dscale-'));
  const metricsPort = await findFreePort();
  const server = await startDevServer({
    dataDir: path.join(root, 'temporal'),
    port: await findFreePort(),
    headless: true,
    // Each node holds one long poll; the default limit of 1,200 concurrent polls per namespace is below 1,000
    // nodes plus the controller's polls (the same setting a production cluster of that size needs).
    extraArgs: [
      '--metrics-port',
      String(metricsPort),
      '--dynamic-config-value',
      `frontend.namespaceCount=${Math.max(1200, 2 * nodes + 200)}`,
      ...extraConfig.flatMap((setting) => ['--dynamic-config-value', setting]),
    ],
  });
  const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
  const driverName = `scale-${nodes}.bench.durable-csi.io`;
  const hosts: ChildProcess[] = [];
  let controller: ChildProcess | undefined;
  const connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection });
  try {
    const started = Date.now();
    for (let first = 0; first < nodes; first += NODES_PER_HOST) {
      hosts.push(await startHost(server.address, driverName, root, first, Math.min(NODES_PER_HOST, nodes - first)));
    }
    const endpoint = `unix://${path.join(root, 'controller.sock')}`;
    controller = spawnCli(
      ['controller', '--endpoint', endpoint, '--driver-name', driverName, '--temporal-address', server.address],
      path.join(root, 'controller.log'),
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
    const pids = { temporal: server.pid, controller: controller.pid!, hosts: hosts.map((host) => host.pid!) };
    const cpu = () => ({
      temporal: cpuMs(pids.temporal),
      controller: cpuMs(pids.controller),
      hosts: pids.hosts.reduce((sum, pid) => sum + cpuMs(pid), 0),
    });

    // Idle: only the records' own traffic.
    const sample = Array.from(
      { length: Math.min(nodes, 20) },
      (_, index) => `vnode-${Math.floor((index * nodes) / 20)}`,
    );
    const recordsBefore = await describeRecords(client, driverName, sample);
    const countersBefore = await scrapeCounters(metricsUrl);
    const idleCpuBefore = cpu();
    const idleStart = Date.now();
    await new Promise((resolve) => setTimeout(resolve, idleMs));
    const idleSeconds = (Date.now() - idleStart) / 1000;
    const idleCpu = perSecond(cpu(), idleCpuBefore, idleSeconds);
    const countersIdle = await scrapeCounters(metricsUrl);
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
    const opsWork = serverWork(countersIdle, await scrapeCounters(metricsUrl));
    const opsCpu = difference(new Map(Object.entries(cpu())), new Map(Object.entries(opsCpuBefore)));
    const totalOps = created.length * 2;
    const cpuPerOp = (key: 'temporal' | 'controller') => {
      const used = opsCpu.get(key) ?? 0;
      return { raw: used / totalOps, net: Math.max(0, used - idleCpu[key] * 1000 * opsSeconds) / totalOps };
    };
    csi.close();
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
      temporal: memoryMiB(pids.temporal),
      controller: memoryMiB(pids.controller),
      hostsPeak: Math.max(...pids.hosts.map((pid) => memoryMiB(pid).peak)),
    };
    return {
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
      cpuPerOp: { temporal: cpuPerOp('temporal'), controller: cpuPerOp('controller') },
      memoryMiB: memory,
    };
  } finally {
    await Promise.all(hosts.map((host) => stopChild(host, 15_000)));
    if (controller) await stopChild(controller);
    await connection.close();
    await server.stop();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

async function startHost(address: string, driverName: string, root: string, first: number, count: number) {
  const script = path.join(__dirname, 'virtual-nodes.js');
  const log = fs.openSync(path.join(root, `host-${first}.log`), 'a');
  const child = spawn(
    process.execPath,
    [script, address, driverName, path.join(root, 'pools'), String(first), String(count)],
    {
      stdio: ['ignore', 'pipe', log],
    },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve());
    child.once('exit', (code) => reject(new Error(`virtual node host ${first} exited with ${code}; see ${root}`)));
  });
  return child;
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
