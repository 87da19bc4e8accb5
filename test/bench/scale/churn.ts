import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { controlTaskQueue, nodeRecordWorkflowId, PhaseKey } from '../../../common/names';
import { failHoldOfPod } from '../../../kubernetes/agent-readiness';
import { readNodeRecord } from '../../../node-records/reads';
import type { CsiClients } from '../../../csi/client';
import { createRequest, createVolume, deleteVolume, MiB, onNode, retryLikeCo } from '../../support/csi-requests';
import { summarize, type LatencyStats } from '../stats';

/**
 * Issue 38 item 2: the cluster while its agents churn. Every agent is restarted once in a rolling wave, 1% of the
 * nodes at a time (each stops as on SIGTERM and starts again, as an upgrade restarts it), while 1% of the nodes
 * crash (their host processes are SIGKILLed and, unless --no-pod-watch, reported gone as the controller's agent Pod
 * watch hears it from kubelet), stay down `--down` and come back; creates and deletes run at concurrency 8
 * throughout. What must hold: nothing waits on a live node (an operation on a node that is not restarting answers as
 * fast as without churn), a crashed node is shown offline in time, a deletion on it waits until it is back (absence
 * is never proof), every record is live again at the end, and no record nears Temporal's history limits.
 */

/** A process running virtual node agents [first, first + count) (virtual-nodes.ts). */
export interface Host {
  first: number;
  count: number;
  child: ChildProcess;
  /** Restarts the named agents in place (as a rolling upgrade does); resolves once each runs again. */
  restart(indexes: number[]): Promise<void>;
}

export async function startHost(
  address: string,
  driverName: string,
  root: string,
  first: number,
  count: number,
  nice = 0,
): Promise<Host> {
  const script = path.join(__dirname, 'virtual-nodes.js');
  const log = fs.openSync(path.join(root, `host-${first}.log`), 'a');
  const child = spawn(
    process.execPath,
    [script, address, driverName, path.join(root, 'pools'), String(first), String(count)],
    { stdio: ['pipe', 'pipe', log] },
  );
  if (nice) os.setPriority(child.pid!, nice);
  const waiting = new Map<string, () => void>();
  const ready = new Promise<void>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('ready')) resolve();
      const [word, ...rest] = line.split(' ');
      if (word === 'restarted') waiting.get(rest.join(' '))?.();
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`virtual node host ${first} exited (${code ?? signal}) before it was ready; see ${root}`)),
    );
  });
  await ready;
  return {
    first,
    count,
    child,
    restart: (indexes) =>
      new Promise<void>((resolve, reject) => {
        const key = indexes.join(' ');
        const timer = setTimeout(() => reject(new Error(`host ${first}: restart ${key} took over 60 s`)), 60_000);
        waiting.set(key, () => {
          clearTimeout(timer);
          waiting.delete(key);
          resolve();
        });
        child.stdin!.write(`restart ${key}\n`);
      }),
  };
}

export interface ChurnReport {
  /** Nodes per wave (1%), waves, and the whole rolling restart. */
  rolling: { batch: number; waves: number; wallMs: number; waveMs: LatencyStats };
  crash: {
    nodes: number;
    /**
     * From the SIGKILL until every crashed node reads offline where the controller reads one node (its record
     * described: the server's own state of the presence hold, as placement, a deletion's answer and `nodes describe`
     * read it).
     */
    offlineAfterMs: number;
    /**
     * ... and until every one is listed offline (the record's phase, as `durable-csi nodes` and the metrics list it):
     * published by the record's own workflow task, so it waits for the controller's queue. Undefined: not within
     * five minutes.
     */
    offlineListedAfterMs?: number;
    downMs: number;
    /** From the hosts' restart until every crashed node's record showed live. */
    liveAgainAfterMs: number;
    /** Deletions asked for while the nodes were down: how many answered before the nodes came back (must be 0). */
    deletesAnsweredWhileDown: number;
    /** When the other deletions answered, from the nodes' return. */
    deletesAfterReturn: LatencyStats;
  };
  /** Creates and deletes at concurrency 8 while the wave ran, split by whether their node was restarting. */
  operations: {
    create: LatencyStats;
    delete: LatencyStats;
    onRestartingNode: { create: LatencyStats; delete: LatencyStats };
  };
  /**
   * The controller's workflow task queue every 10 s of the churn (the server's approximate figures): node records and
   * CSI operations share it, so a backlog there is what a create waits behind.
   */
  controlBacklog: { maxCount: number; maxAgeMs: number; samples: number };
  /** After the churn: node records live (of all), and the largest record of a sample (the crashed nodes' included). */
  liveAfter: number;
  largestRecord: { events: number; bytes: number };
}

export interface ChurnSetup {
  client: Client;
  csi: CsiClients;
  driverName: string;
  nodes: number;
  /** Hosts of the nodes the wave restarts. */
  hosts: Host[];
  /** Hosts of the nodes that crash: SIGKILLed, then started again with startAgain. */
  crashHosts: Host[];
  startAgain(host: Host): Promise<Host>;
  /** How long the crashed nodes stay down (past the presence timeout, so that they are shown offline). */
  downMs: number;
  /** The shortest time a wave takes (0: as soon as its agents hold presence again). */
  waveEveryMs: number;
  /**
   * Whether a crash is reported as deploy/'s controller hears of it (kubelet: the agent's container exited; the
   * controller's Pod watch fails its hold, `failHoldOfPod`), or left to the presence timeout alone.
   */
  podWatch: boolean;
  log(message: string): void;
}

/** Runs the wave, the crash and the operations together; the crash hosts in the setup are replaced on return. */
export async function runChurn(setup: ChurnSetup): Promise<ChurnReport> {
  const crashed = new Set(setup.crashHosts.flatMap((host) => range(host.first, host.count)));
  const restartable = setup.hosts.flatMap((host) => range(host.first, host.count));
  const restarting = new Map<number, Array<[number, number]>>();
  let done = false;

  const operations = runOperations(setup, restartable, () => done);
  const backlog = sampleBacklog(setup, () => done);
  const crash = crashAndReturn(setup, [...crashed]);
  const rolling = rollingRestart(setup, restarting);
  let reports: [ChurnReport['rolling'], ChurnReport['crash']];
  try {
    reports = await Promise.all([rolling, crash]);
  } finally {
    done = true; // the operations' loops end with the churn, also when it failed
  }
  const [rollingReport, crashReport] = reports;
  const ops = await operations;
  const controlBacklog = await backlog;

  const overlaps = (node: number, start: number, end: number) =>
    (restarting.get(node) ?? []).some(([from, to]) => from < end && to > start);
  const split = (kind: 'create' | 'delete', onRestarting: boolean) =>
    summarize(
      ops.filter((op) => op.kind === kind && overlaps(op.node, op.start, op.end) === onRestarting).map(latency),
      ops.length ? Math.max(...ops.map((op) => op.end)) - Math.min(...ops.map((op) => op.start)) : 0,
    );

  const all = [...restartable, ...crashed];
  const sample = [...crashed, ...Array.from({ length: 100 }, () => all[Math.floor(Math.random() * all.length)]!)];
  const records = await Promise.all(sample.map((node) => describeRecord(setup, node)));
  const liveAfter = await waitForPhase(setup, all, 'live', 120_000).then(
    () => all.length,
    async () => (await Promise.all(all.map((node) => describeRecord(setup, node)))).filter((r) => r.live).length,
  );
  return {
    rolling: rollingReport,
    crash: crashReport,
    operations: {
      create: split('create', false),
      delete: split('delete', false),
      onRestartingNode: { create: split('create', true), delete: split('delete', true) },
    },
    controlBacklog,
    liveAfter,
    largestRecord: {
      events: Math.max(...records.map((r) => r.events)),
      bytes: Math.max(...records.map((r) => r.bytes)),
    },
  };
}

/** The control queue's backlog, every 10 s until `finished`: the largest count and age seen. */
async function sampleBacklog(setup: ChurnSetup, finished: () => boolean): Promise<ChurnReport['controlBacklog']> {
  const seen = { maxCount: 0, maxAgeMs: 0, samples: 0 };
  while (!finished()) {
    try {
      const { stats } = await setup.client.workflowService.describeTaskQueue({
        namespace: setup.client.options.namespace,
        taskQueue: { name: controlTaskQueue(setup.driverName) },
        taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        reportStats: true,
      });
      const age = stats?.approximateBacklogAge;
      seen.maxCount = Math.max(seen.maxCount, Number(stats?.approximateBacklogCount ?? 0));
      seen.maxAgeMs = Math.max(seen.maxAgeMs, Number(age?.seconds ?? 0) * 1000 + (age?.nanos ?? 0) / 1e6);
      seen.samples++;
      if (seen.samples % 6 === 0)
        setup.log(
          `control queue backlog ${String(stats?.approximateBacklogCount ?? 0)} tasks, ${Number(age?.seconds ?? 0)} s old`,
        );
    } catch {
      // a busy server may not answer in time: the sample is skipped, never taken for an empty queue
    }
    await new Promise((resolve) => setTimeout(resolve, 10_000));
  }
  return seen;
}

interface Operation {
  kind: 'create' | 'delete';
  node: number;
  start: number;
  end: number;
}
const latency = (op: Operation) => op.end - op.start;
/** How long the benchmark repeats a call before it gives up (and fails): far beyond any answer it expects. */
const CO_PATIENCE_MS = 30 * 60_000;

/**
 * Eight loops of create then delete on random nodes the wave restarts (the crashed ones have their own deletes). Each
 * call is repeated as a CO repeats it (external-provisioner never gives up), so a stall shows as latency.
 */
async function runOperations(setup: ChurnSetup, nodes: number[], finished: () => boolean): Promise<Operation[]> {
  const ops: Operation[] = [];
  let sequence = 0;
  // Settled, all of them, before a failure is thrown: a loop still calling when the benchmark stops its processes
  // would otherwise fail unhandled and end the process before it stops its server.
  const loops = await Promise.allSettled(
    Array.from({ length: 8 }, async () => {
      while (!finished()) {
        const node = nodes[Math.floor(Math.random() * nodes.length)]!;
        let start = Date.now();
        const name = `churn-${sequence++}`;
        const answer = await retryLikeCo(
          () => createVolume(setup.csi, createRequest(name, MiB, onNode(`vnode-${node}`))),
          CO_PATIENCE_MS,
        );
        ops.push({ kind: 'create', node, start, end: Date.now() });
        start = Date.now();
        await retryLikeCo(() => deleteVolume(setup.csi, answer.volume!.volume_id), CO_PATIENCE_MS);
        ops.push({ kind: 'delete', node, start, end: Date.now() });
      }
    }),
  );
  const failed = loops.find((loop) => loop.status === 'rejected');
  if (failed) throw failed.reason;
  return ops;
}

/**
 * Every agent the wave owns restarted once, 1% of the cluster at a time; a wave ends when its agents hold presence
 * again, and not before `waveEveryMs` (a DaemonSet's rolling update waits for each new Pod to be Ready, seconds at
 * least).
 */
async function rollingRestart(setup: ChurnSetup, restarting: Map<number, Array<[number, number]>>) {
  const batch = Math.max(1, Math.round(setup.nodes / 100));
  const waveMs: number[] = [];
  const started = Date.now();
  const order = setup.hosts.flatMap((host) => range(host.first, host.count).map((node) => ({ node, host })));
  for (let wave = 0; wave * batch < order.length; wave++) {
    const members = order.slice(wave * batch, (wave + 1) * batch);
    const begin = Date.now();
    const byHost = new Map<Host, number[]>();
    for (const { node, host } of members) byHost.set(host, [...(byHost.get(host) ?? []), node]);
    await Promise.all([...byHost].map(([host, nodes]) => host.restart(nodes)));
    // Live again as the controller reads one node (its new agent holds presence), not as listed: a record's phase
    // still reads live until its own workflow task takes in the restart, which under a backlog comes after the
    // agent is back, so a wave ended on the phase ran ahead of the records (docs/scale.md, 5,000 nodes).
    await waitForRead(
      setup,
      members.map((m) => m.node),
      true,
      10 * 60_000,
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, begin + setup.waveEveryMs - Date.now())));
    const end = Date.now();
    for (const { node } of members) restarting.set(node, [...(restarting.get(node) ?? []), [begin, end]]);
    waveMs.push(end - begin);
    if (wave % 10 === 0) setup.log(`wave ${wave + 1}: ${members.length} agents restarted in ${end - begin} ms`);
  }
  return { batch, waves: waveMs.length, wallMs: Date.now() - started, waveMs: summarize(waveMs, Date.now() - started) };
}

/** The crash hosts SIGKILLed with a volume on each of their nodes whose deletion is asked for while they are down. */
async function crashAndReturn(setup: ChurnSetup, nodes: number[]): Promise<ChurnReport['crash']> {
  const volumes = await Promise.all(
    nodes.map(async (node) => {
      const answer = await retryLikeCo(
        () => createVolume(setup.csi, createRequest(`crash-${node}`, MiB, onNode(`vnode-${node}`))),
        CO_PATIENCE_MS,
      );
      return answer.volume!.volume_id;
    }),
  );
  const killedAt = Date.now();
  for (const host of setup.crashHosts) host.child.kill('SIGKILL');
  setup.log(`${nodes.length} nodes crashed (their hosts SIGKILLed)`);
  if (setup.podWatch) {
    // What the controller's agent Pod watch does when kubelet reports the container exited (measured apart with
    // real kubelets: under a second, docs/scale.md); here without the informer, through the same function.
    await Promise.all(
      setup.crashHosts.map((host) =>
        host.child.exitCode === null && host.child.signalCode === null ? once(host.child, 'exit') : undefined,
      ),
    );
    const outcomes = await Promise.all(
      nodes.map((node) =>
        failHoldOfPod(
          setup.client,
          setup.driverName,
          { name: `vnode-${node}`, namespace: 'bench', nodeId: `vnode-${node}` },
          'its container exited (SIGKILL)',
        ),
      ),
    );
    setup.log(`the Pod watch's part played: ${outcomes.filter((outcome) => outcome === 'failed').length} holds failed`);
  }
  let returnedAt = Infinity;
  const answered: number[] = [];
  const deletions = Promise.all(
    volumes.map(async (volumeId) => {
      await retryLikeCo(() => deleteVolume(setup.csi, volumeId), CO_PATIENCE_MS, 1000);
      answered.push(Date.now());
    }),
  );
  // Awaited below; until then a failure (the run stopped by a signal cancels the calls) must not end the process
  // unhandled, before it stops its server.
  deletions.catch(() => undefined);
  const listed = waitForPhase(setup, nodes, 'offline', 5 * 60_000).then(
    () => Date.now() - killedAt,
    () => undefined,
  );
  await waitForRead(setup, nodes, false, 5 * 60_000);
  const offlineAfterMs = Date.now() - killedAt;
  setup.log(`the crashed nodes read offline after ${offlineAfterMs} ms`);
  const offlineListedAfterMs = await listed;
  setup.log(`the crashed nodes listed offline after ${offlineListedAfterMs ?? 'over 300000'} ms`);
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, killedAt + setup.downMs - Date.now())));
  const deletesAnsweredWhileDown = answered.length;
  returnedAt = Date.now();
  const restarted = await Promise.all(setup.crashHosts.map((host) => setup.startAgain(host)));
  setup.crashHosts.splice(0, setup.crashHosts.length, ...restarted);
  await waitForPhase(setup, nodes, 'live', 5 * 60_000);
  const liveAgainAfterMs = Date.now() - returnedAt;
  setup.log(`the crashed nodes live again after ${liveAgainAfterMs} ms`);
  await deletions;
  return {
    nodes: nodes.length,
    offlineAfterMs,
    offlineListedAfterMs,
    downMs: returnedAt - killedAt,
    liveAgainAfterMs,
    deletesAnsweredWhileDown,
    deletesAfterReturn: summarize(
      answered.filter((at) => at >= returnedAt).map((at) => at - returnedAt),
      Date.now() - returnedAt,
    ),
  };
}

async function describeRecord(setup: ChurnSetup, node: number) {
  const description = await setup.client.workflow
    .getHandle(nodeRecordWorkflowId(setup.driverName, `vnode-${node}`))
    .describe();
  const info = description.raw.workflowExecutionInfo;
  return {
    live: description.typedSearchAttributes.get(PhaseKey) === 'live',
    phase: description.typedSearchAttributes.get(PhaseKey),
    events: Number(info?.historyLength ?? 0),
    bytes: Number(info?.historySizeBytes ?? 0),
  };
}

/** Until every named node's record is in the phase (read from each record, 20 at a time). */
async function waitForPhase(setup: ChurnSetup, nodes: number[], phase: 'live' | 'offline', timeoutMs: number) {
  const until = Date.now() + timeoutMs;
  let pending = nodes;
  while (pending.length) {
    const phases: boolean[] = [];
    for (let at = 0; at < pending.length; at += 20) {
      const part = pending.slice(at, at + 20);
      phases.push(
        ...(await Promise.all(
          part.map((node) =>
            describeRecord(setup, node).then(
              (record) => record.phase === phase,
              () => false,
            ),
          ),
        )),
      );
    }
    pending = pending.filter((_, index) => !phases[index]);
    if (!pending.length) return;
    if (Date.now() > until)
      throw new Error(`${pending.length} node records not ${phase} after ${timeoutMs} ms: vnode-${pending[0]}...`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** Until every named node reads live (or not) as the controller reads one node (readNodeRecord). */
async function waitForRead(setup: ChurnSetup, nodes: number[], live: boolean, timeoutMs: number) {
  const until = Date.now() + timeoutMs;
  let pending = nodes;
  while (pending.length) {
    const views = await Promise.all(
      pending.map((node) => readNodeRecord(setup.client, setup.driverName, `vnode-${node}`).catch(() => undefined)),
    );
    pending = pending.filter((_, index) => views[index]?.node?.live !== live);
    if (!pending.length) return;
    if (Date.now() > until)
      throw new Error(`${pending.length} nodes do not read ${live ? 'live' : 'offline'} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

function range(first: number, count: number): number[] {
  return Array.from({ length: count }, (_, index) => first + index);
}
