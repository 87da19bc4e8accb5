import {
  CancellationScope,
  condition,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { ActivityOptions, RetryPolicy } from '@temporalio/common';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities, NodeDeleteInput, NodeDeleteOutcome } from '../activities/node-activities';
import { COPY_TIME_CEILING_MS, COPY_TIME_MARGIN_MS } from '../common/copy-budget';
import { FailureType, NON_RETRYABLE_TYPES } from '../common/failures';
import {
  nodeForgottenSignal,
  nodeLivenessSignal,
  nodeTaskQueue,
  PhaseKey,
  WaitingSinceKey,
  type ForgetNotice,
  type WrittenOffVolume,
} from '../common/names';

/**
 * How a workflow works on a node: the options of its activities on the node's own queue, its phase following the
 * node's liveness while it waits there, the end of that work when the node is forgotten for good, and the write-off
 * that keeps what a forgotten node may still hold on the node's record. Every operation workflow (create, delete,
 * expand, snapshot) is a short story over these; the deletions are nothing else, so they are here too (at the end).
 */

/*
 * The options of every storage activity on a node's own queue (activities/node-activities.ts).
 *
 * Node activities heartbeat every second (activities/node-activities.ts), so a dead agent is noticed after the
 * heartbeat timeout, in seconds, and the attempt is retried on the same node; the start-to-close timeout only has
 * to allow for the slowest honest attempt. Of the activities that change a pool, none has a schedule-to-start
 * timeout except create's first try: a node that is down keeps its work waiting in its queue until the agent
 * returns (invariant 2). The reads (list, inspect) move on from a node that does not pick them up.
 *
 * The heartbeat timeouts differ for no reason of their own: create has had 5 s since it was written, delete and
 * expand 10 s. Both are far above the 1 s interval. They are kept as they were, since the timeouts are part of
 * what the crash tests measure; unifying them would only change how soon a dead agent's create is retried.
 */

/** Retry on the node until it answers; only bad input (a non-retryable failure type) ends the retries. */
export const UNTIL_THE_NODE_ANSWERS: RetryPolicy = {
  initialInterval: '1s',
  maximumInterval: '30s',
  nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES],
};

/** Create's heartbeat timeout (see above for why it is not delete's). */
const CREATE_HEARTBEAT_TIMEOUT = '5s';
/** Delete's and expand's heartbeat timeout. */
const HEARTBEAT_TIMEOUT = '10s';
/** Allocating a reservation or a preallocated image file (and formatting it) stays well within a minute. */
const ALLOCATE_OR_DELETE_TIMEOUT = '60s';
/**
 * Expansion has had 5 m since it was written (aa484dc, no reason recorded); growing a loop image may resize its
 * filesystem online, the slowest step on a large volume. Kept.
 */
const EXPAND_TIMEOUT = '5m';
/**
 * A snapshot, a restore or a clone copies a whole volume (cp, reflinked where the filesystem can): as slow as the
 * disk when it cannot. The node bounds each copy by a budget derived from its size (common/copy-budget.ts): the
 * copy is stopped and the attempt fails, retryably, when it runs past it. The workflow does not know a snapshot's
 * source size, so this is the ceiling of every budget plus the steps around the copy: the node's budget always ends
 * an attempt first, and the 1 s heartbeat notices a dead agent in seconds. (It was 30 m, shorter than the budget of
 * a large volume: Temporal then retried while the first copy still ran.)
 */
const COPY_TIMEOUT = COPY_TIME_CEILING_MS + COPY_TIME_MARGIN_MS;

/**
 * The first attempt on a node may be abandoned only if it provably never ran (invariant 4). A node's queue has
 * no other poller, so a schedule-to-start timeout means the agent is not there; one attempt only, because a
 * second attempt's schedule-to-start timeout would say nothing about whether the first one allocated.
 */
const FIRST_TRY_SCHEDULE_TO_START = '20s';

/** `copying`: a restore or clone, whose allocation is a copy of its source. */
export function createFirstTryOptions(driverName: string, nodeId: string, copying = false): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    scheduleToStartTimeout: FIRST_TRY_SCHEDULE_TO_START,
    startToCloseTimeout: copying ? COPY_TIMEOUT : ALLOCATE_OR_DELETE_TIMEOUT,
    heartbeatTimeout: CREATE_HEARTBEAT_TIMEOUT,
    retry: { maximumAttempts: 1 },
  };
}

/** Once an attempt may have allocated, the node must finish what it started: retry there until it answers. */
export function createCompletionOptions(driverName: string, nodeId: string, copying = false): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    startToCloseTimeout: copying ? COPY_TIMEOUT : ALLOCATE_OR_DELETE_TIMEOUT,
    heartbeatTimeout: CREATE_HEARTBEAT_TIMEOUT,
    retry: UNTIL_THE_NODE_ANSWERS,
  };
}

/** Deleting on the volume's home node and nowhere else; waits in the queue while the node is down. */
export function deleteOptions(driverName: string, nodeId: string, summary: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    startToCloseTimeout: ALLOCATE_OR_DELETE_TIMEOUT,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: UNTIL_THE_NODE_ANSWERS,
    summary,
  };
}

export function expandOptions(driverName: string, nodeId: string, summary: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    startToCloseTimeout: EXPAND_TIMEOUT,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: UNTIL_THE_NODE_ANSWERS,
    summary,
  };
}

/**
 * A listing asks live nodes only and moves past one that does not pick the work up within 5 s (its entries are
 * missing from the answer, which says so): one attempt, no waiting for a node that is down.
 */
export function listOptions(driverName: string, nodeId: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    scheduleToStartTimeout: '5s',
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 1 },
  };
}

/**
 * A look at one volume (ValidateVolumeCapabilities) asks its node once and gives up after 10 s unpicked: the CO
 * waits on the call, and is told the node is Unavailable and to try again.
 */
export function inspectOptions(driverName: string, nodeId: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    scheduleToStartTimeout: '10s',
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 1 },
  };
}

/** A snapshot is made on its source's node and nowhere else: waits in the queue while the node is down. */
export function snapshotOptions(driverName: string, nodeId: string, summary: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    startToCloseTimeout: COPY_TIMEOUT,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: UNTIL_THE_NODE_ANSWERS,
    summary,
  };
}

/**
 * A move's steps (workflows/move-volume.ts) on either of its nodes: a snapshot, an offer (hashing the image), a pull
 * or an adopt (copying it) may take as long as a snapshot's copy, and wait in the node's queue while it is down. A
 * pull heartbeats its progress at every checkpoint (about once a second). Internal ends the retries too: the source's
 * copy no longer matches its manifest, and only a new snapshot would help, so the move rolls back.
 */
export function moveOptions(driverName: string, nodeId: string, summary: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    startToCloseTimeout: COPY_TIMEOUT,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: { ...UNTIL_THE_NODE_ANSWERS, nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES, FailureType.Internal] },
    summary,
  };
}

/** What an operation is doing on a node, for the details line: "deleting", "allocating", ... */
export interface NodeWork {
  nodeId: string;
  doing: string;
  /** The phase shown while the node is live: `running` unless told (a move names each of its steps). */
  phase?: string;
}

export interface LivenessFollower {
  /**
   * The operation now waits on this node; `live` is the best knowledge at this moment (unknown: undefined).
   * `shown`: the workflow was started with the matching phase already (no upsert needed).
   */
  waitOn(work: NodeWork, live: boolean | undefined, at: Date, shown?: boolean): void;
  /** The operation no longer waits on any node. */
  stop(): void;
}

/** Registers the liveness handler; phase changes only while the operation waits on the notice's node. */
export function followNodeLiveness(): LivenessFollower {
  let current: NodeWork | undefined;
  let shownLive: boolean | undefined;
  let latest = '';
  const show = (work: NodeWork, live: boolean | undefined, at: Date, shown = false) => {
    shownLive = live;
    if (live === false || live === undefined) {
      if (!shown)
        upsertSearchAttributes([
          { key: PhaseKey, value: 'waiting-for-node' },
          { key: WaitingSinceKey, value: at },
        ]);
      const why = live === false ? 'offline' : 'unknown to this driver: no agent has registered it';
      setCurrentDetails(`${work.doing} waits for node ${work.nodeId} (${why}) since ${at.toISOString()}`);
    } else {
      if (!shown) upsertSearchAttributes([{ key: PhaseKey, value: work.phase ?? 'running' }]);
      setCurrentDetails(`${work.doing} on node ${work.nodeId}`);
    }
  };
  setHandler(nodeLivenessSignal, (notice) => {
    if (notice.at < latest) return; // announcements may arrive out of order; ISO strings sort by time
    latest = notice.at;
    if (!current || notice.nodeId !== current.nodeId || notice.live === shownLive) return;
    show(current, notice.live, new Date(notice.at));
  });
  return {
    waitOn(work, live, at, shown) {
      current = work;
      show(work, live, at, shown);
    },
    stop() {
      current = undefined;
    },
  };
}

export type UntilForgotten<T> = { forgotten: false; value: T } | { forgotten: true; notice: ForgetNotice };

/**
 * Runs work against a node until it finishes or that node is forgotten, in which case the work is cancelled.
 * Notices are kept for the whole workflow (a create visits several nodes); each ends only work on the node it names.
 */
export function listenForForget(): <T>(nodeId: string, work: () => Promise<T>) => Promise<UntilForgotten<T>> {
  const notices: ForgetNotice[] = [];
  setHandler(nodeForgottenSignal, (received) => {
    notices.push(received);
  });
  return async <T>(nodeId: string, work: () => Promise<T>): Promise<UntilForgotten<T>> => {
    let judged = 0;
    /** The first notice not judged yet that names this work's node: a notice about another node ends nothing. */
    const ending = (): ForgetNotice | undefined => {
      while (judged < notices.length) {
        const notice = notices[judged++]!;
        if (notice.nodeId === nodeId) return notice;
      }
      return undefined;
    };
    const early = ending();
    if (early) return { forgotten: true, notice: early };
    const { finished, cancel } = startCancellable(work, (value) => ({ forgotten: false as const, value }));
    for (;;) {
      const winner = await Promise.race([finished, condition(() => judged < notices.length).then(() => undefined)]);
      if (winner) return winner;
      const notice = ending();
      if (notice) {
        cancel();
        return { forgotten: true, notice };
      }
    }
  };
}

/**
 * Starts work in its own cancellation scope, to be raced against a signal (a forget notice, a renewal): whoever
 * loses the race cancels it. `wrap` shapes the result inside the same `then`, so the promise chain, and with it
 * the order in which a replay settles the race, is exactly the one the callers had before sharing this.
 */
export function startCancellable<T, R>(
  work: () => Promise<T>,
  wrap: (value: T) => R,
): { finished: Promise<R>; cancel: () => void } {
  const scope = new CancellationScope();
  const running = scope.run(work);
  running.catch(() => undefined); // once cancelled, its failure is expected and ignored
  return { finished: running.then(wrap), cancel: () => scope.cancel() };
}

// Retried until it is recorded: the write-off is what makes an answer about a forgotten node true.
const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '30s', retry: { maximumInterval: '10s' } });

/**
 * Keeps a volume or snapshot copy the CO was told is gone, while its node is forgotten, on that node's record
 * (workflows/written-off-volumes.ts), which deletes it there should the node return with the same pool.
 */
export function recordWriteOff(driverName: string, nodeId: string, volume: WrittenOffVolume): Promise<void> {
  return control.recordWriteOff({ driverName, nodeId, volume });
}

// The deletions: work on the node and nothing else, so they live beside the helpers they are made of.

/**
 * Deleting a volume (deleteVolume) or a snapshot copy (deleteSnapshot) on its home node and nowhere else. The node
 * activity has no schedule-to-start timeout: when the node is down (or unknown: no record is proof that a volume
 * does not exist) the task simply waits in the node's queue until its agent returns. Retries never give up; only the
 * node's pool (`deleted`, `absent`, `pool-replaced`) or the decision that the node is gone for good (`durable-csi
 * nodes forget`, recorded as the outcome `node-forgotten`) ends it.
 */
export interface DeleteVolumeInput {
  driverName: string;
  volumeId: string;
  nodeId: string;
  key: string;
  poolIdPrefix: string;
  /**
   * The node's liveness as its record showed when the request arrived: only what operators see depends on it.
   * Undefined when no record exists (the node is unknown). The controller starts the workflow with the matching
   * phase (search attributes set at start cost no extra write).
   */
  nodeLive?: boolean;
  /** The node was already forgotten for good when the request arrived: the recorded decision ends the deletion. */
  forgotten?: ForgetNotice;
}

export interface DeleteSnapshotInput extends Omit<DeleteVolumeInput, 'volumeId'> {
  snapshotId: string;
}

export interface DeletionResult {
  outcome: NodeDeleteOutcome | 'node-forgotten';
  nodeId: string;
  /** For node-forgotten: the operator's reason. */
  reason?: string;
}

export type DeleteVolumeResult = DeletionResult;
export type DeleteSnapshotResult = DeletionResult;

export async function deleteVolume(input: DeleteVolumeInput): Promise<DeleteVolumeResult> {
  return deleteOnItsNode({ ...input, id: input.volumeId, kind: 'volume' });
}

export async function deleteSnapshot(input: DeleteSnapshotInput): Promise<DeleteSnapshotResult> {
  return deleteOnItsNode({ ...input, id: input.snapshotId, kind: 'snapshot' });
}

interface Deletion extends Omit<DeleteVolumeInput, 'volumeId'> {
  /** The volume ID or the snapshot ID. */
  id: string;
  kind: 'volume' | 'snapshot';
}

async function deleteOnItsNode(deletion: Deletion): Promise<DeletionResult> {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  if (deletion.forgotten) return writtenOff(deletion, deletion.forgotten);
  // The controller started this workflow with the node ID and the phase matching `nodeLive`.
  const doing = deletion.kind === 'volume' ? 'deletion' : 'snapshot deletion';
  liveness.waitOn({ nodeId: deletion.nodeId, doing }, deletion.nodeLive, workflowInfo().startTime, true);
  const summary = `delete ${deletion.kind} ${deletion.key} from the pool of ${deletion.nodeId}`;
  const onNode = proxyActivities<NodeActivities>(deleteOptions(deletion.driverName, deletion.nodeId, summary));
  const where: NodeDeleteInput = { key: deletion.key, poolIdPrefix: deletion.poolIdPrefix };
  const result = await untilForgotten(deletion.nodeId, () =>
    deletion.kind === 'volume' ? onNode.deleteVolumeOnNode(where) : onNode.deleteSnapshotOnNode(where),
  );
  liveness.stop();
  if (result.forgotten) return writtenOff(deletion, result.notice);
  return finish({ outcome: result.value, nodeId: deletion.nodeId });
}

/**
 * The node is gone for good, so nothing deleted the volume or copy. Before the CO is told it is gone, it is kept on
 * the node's record, which deletes it for real should the node ever return with this pool.
 */
async function writtenOff(deletion: Deletion, notice: ForgetNotice): Promise<DeletionResult> {
  const volume: WrittenOffVolume = {
    volumeId: deletion.id,
    key: deletion.key,
    poolIdPrefix: deletion.poolIdPrefix,
    reason: notice.reason,
    ...(deletion.kind === 'snapshot' && { kind: 'snapshot' as const }),
  };
  await recordWriteOff(deletion.driverName, deletion.nodeId, volume);
  return finish({ outcome: 'node-forgotten', nodeId: deletion.nodeId, reason: notice.reason });
}

function finish(result: DeletionResult): DeletionResult {
  upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
  setCurrentDetails(`done: ${result.outcome}${result.reason ? ` (${result.reason})` : ''}`);
  return result;
}
