import { status, type ServiceError } from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseQuantity } from '../../common/quantity';
import { formatVolumeId, poolIdPrefix } from '../../common/names';
import { DirBackend } from '../../storage/dir/dir-backend';
import { waitUntilReady } from '../../agent/wait-ready';
import { MiB, deleteVolume, retryLikeCo } from '../support/csi-requests';
import type { DurableTarget } from './durable';
import { measure, messageOf } from './measure';
import type { CostMeter, PhaseCost } from './phase-cost';
import { runPool } from './stats';

/**
 * The drain: `count` deletions wait in the queue of a node that is down, then the node agent starts again. What
 * matters is how long after its start every volume is gone, and what the wait and the drain cost in memory.
 */
export interface DrainResult {
  count: number;
  nodeId: string;
  /** The volumes put into the node's pool beforehand (directly: how they were created does not matter here). */
  fill: { wallMs: number; opsPerSec: number };
  /** The DeleteVolume calls made while the node was down, by answer (ABORTED expected: still waiting). */
  requestAnswers: Record<string, number>;
  requestWallMs: number;
  /** Volumes still on disk when the node came back (must be all of them: nothing may be deleted without it). */
  onDiskWhileDown: number;
  /** From the node agent's spawn: its CSI socket serving, the first volume gone, the last one gone. */
  readyMs: number | undefined;
  firstGoneMs: number | undefined;
  allGoneMs: number | undefined;
  /** From the node agent's spawn until every DeleteVolume answered OK when called again. */
  confirmedMs: number | undefined;
  /**
   * While the deletions were requested and waited; then from the restart until the last volume was gone; then
   * while every DeleteVolume was called again until it answered OK (the workflows finishing behind the disk).
   */
  waitCost: PhaseCost;
  drainCost: PhaseCost;
  confirmCost: PhaseCost | undefined;
  problems: string[];
}

const REQUEST_DEADLINE_MS = 1_500; // the controller answers ABORTED after 500 ms: the deletion stays recorded
const REQUEST_CONCURRENCY = 32;
const DRAIN_CAPACITY = '16Ti';
const DRAIN_TIMEOUT_MS = 300_000;
const POLL_MS = 20;

function codeName(error: unknown): string {
  const code = (error as ServiceError).code;
  return code === undefined ? `error: ${messageOf(error)}` : (status[code] ?? String(code));
}

/**
 * Creates volumes in a pool whose agent is stopped, through the storage backend itself: their deletions are what
 * is measured, and filling a pool through Temporal takes minutes (each create reads every record of the pool).
 */
async function fillPool(pool: string, nodeId: string, runId: string, count: number) {
  const backend = new DirBackend({ pool, capacityBytes: parseQuantity(DRAIN_CAPACITY), quota: 'none' });
  const { poolId } = await backend.open();
  const started = performance.now();
  const volumeIds: string[] = [];
  try {
    for (let index = 0; index < count; index++) {
      const key = randomBytes(16).toString('hex');
      await backend.createVolume({ key, name: `drain-${runId}-${index}`, capacityBytes: MiB, parameters: {} });
      volumeIds.push(formatVolumeId({ nodeId, poolIdPrefix: poolIdPrefix(poolId), key }));
    }
  } finally {
    await backend.close();
  }
  const wallMs = performance.now() - started;
  return { volumeIds, stats: { wallMs, opsPerSec: (count * 1000) / wallMs } };
}

export async function runDrain(
  target: DurableTarget,
  meter: CostMeter,
  runId: string,
  count: number,
  progress: (message: string) => void,
): Promise<DrainResult> {
  const nodeId = 'node-drain';
  const problems: string[] = [];
  // Started once so that the node is registered (a deletion for a node nobody knows would not wait), then stopped.
  let node = await target.cluster.startNode(nodeId, { capacity: DRAIN_CAPACITY });
  await node.stop();

  progress(`drain: ${count} volumes straight into ${nodeId}'s pool while its agent is down`);
  const filled = await fillPool(target.cluster.pool(nodeId), nodeId, runId, count);
  const volumeIds = filled.volumeIds;

  progress(`drain: requesting ${volumeIds.length} deletions`);
  const waitStart = await meter.begin();
  const requestAnswers: Record<string, number> = {};
  const requestStart = performance.now();
  // ABORTED says the deletion is recorded and waiting; any other answer (a deadline on a busy machine) is asked again.
  let unrecorded = volumeIds;
  for (let round = 0; round < 5 && unrecorded.length > 0; round++) {
    const again: string[] = [];
    await runPool(unrecorded, REQUEST_CONCURRENCY, async (volumeId) => {
      const answer = await deleteVolume(target.clients, volumeId, REQUEST_DEADLINE_MS).then(
        () => 'OK',
        (error: unknown) => codeName(error),
      );
      requestAnswers[answer] = (requestAnswers[answer] ?? 0) + 1;
      if (answer !== 'ABORTED') again.push(volumeId);
    });
    unrecorded = again;
  }
  if (unrecorded.length > 0) problems.push(`drain: ${unrecorded.length} deletions never answered ABORTED`);
  const requestWallMs = performance.now() - requestStart;
  const waitCost = await meter.end(waitStart, volumeIds.length);
  const onDiskWhileDown = target.cluster.volumesOnDisk(nodeId).length;
  if (onDiskWhileDown !== volumeIds.length) {
    problems.push(`drain: ${volumeIds.length - onDiskWhileDown} volumes vanished while their node was down`);
  }

  progress(`drain: starting ${nodeId} again`);
  const drainStart = await meter.begin();
  const spawnedAt = performance.now();
  const since = () => performance.now() - spawnedAt;
  node = await target.cluster.startNode(nodeId, { capacity: DRAIN_CAPACITY, waitReady: false });
  meter.watch.add({ name: nodeId, group: 'node agents', pid: node.child.pid ?? 0 });
  let readyMs: number | undefined;
  void waitUntilReady(node.endpoint, 60_000).then(
    () => (readyMs = since()),
    () => undefined,
  );
  let firstGoneMs: number | undefined;
  let allGoneMs: number | undefined;
  while (allGoneMs === undefined && since() < DRAIN_TIMEOUT_MS && node.child.exitCode === null) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    const left = target.cluster.volumesOnDisk(nodeId).length;
    if (firstGoneMs === undefined && left < onDiskWhileDown) firstGoneMs = since();
    if (left === 0) allGoneMs = since();
  }
  const drainCost = await meter.end(drainStart, volumeIds.length);
  if (allGoneMs === undefined) {
    problems.push(
      `drain: ${target.cluster.volumesOnDisk(nodeId).length} volumes still on disk ${Math.round(since() / 1000)} s ` +
        `after ${nodeId} started${node.child.exitCode === null ? '' : ` (it exited with ${node.child.exitCode})`}`,
    );
  }

  let confirmedMs: number | undefined;
  let confirmCost: PhaseCost | undefined;
  if (allGoneMs !== undefined) {
    progress('drain: confirming every deletion through DeleteVolume');
    const confirmStart = await meter.begin();
    const confirmed = await measure(volumeIds, 32, (volumeId) =>
      retryLikeCo(() => deleteVolume(target.clients, volumeId, 30_000), 120_000),
    );
    confirmCost = await meter.end(confirmStart, volumeIds.length);
    if (confirmed.result.failures === 0) confirmedMs = since();
    else problems.push(`drain: ${confirmed.result.failures} DeleteVolume calls failed after the drain`);
  }
  return {
    count: volumeIds.length,
    nodeId,
    fill: filled.stats,
    requestAnswers,
    requestWallMs,
    onDiskWhileDown,
    readyMs,
    firstGoneMs,
    allGoneMs,
    confirmedMs,
    waitCost,
    drainCost,
    confirmCost,
    problems,
  };
}
