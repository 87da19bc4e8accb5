import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type {
  ControlActivities,
  MovedClaim,
  MovedSnapshot,
  SnapshotSwitchInput,
  SwitchInput,
} from '../activities/control-activities';
import type {
  NodeActivities,
  NodeOfferResult,
  NodePullResult,
  NodeSnapshotResult,
} from '../activities/node-activities';
import { FailureType, NON_RETRYABLE_TYPES } from '../common/failures';
import {
  NodeIdKey,
  PhaseKey,
  formatSnapshotId,
  formatVolumeId,
  movedObjectName,
  poolIdPrefix,
  type ForgetNotice,
  type MovePhase,
} from '../common/names';
import { followNodeLiveness, listenForForget, moveOptions, recordWriteOff, snapshotOptions } from './node-work';

export interface MoveVolumeInput {
  driverName: string;
  volumeId: string;
  /** The volume's node, pool prefix and key (parsed from its ID by the client that started the move). */
  sourceNodeId: string;
  poolIdPrefix: string;
  sourceKey: string;
  targetNodeId: string;
  /** The target's transfer key as its node record published it (NodeReport.transfer). */
  targetPublicKey: string;
  /** Drawn at random by the client that started this run, so every retry of a step asks for the same. */
  moveKey: string;
  snapshotKey: string;
  /** The new volume's key on the target. */
  newKey: string;
  /** The key of a move of this volume that was terminated: its hold on the volume is taken over. */
  replacing?: string;
  /** The nodes' liveness as their records showed at the start (undefined: no record); drives the phase. */
  sourceLive?: boolean;
  targetLive?: boolean;
  /**
   * Only roll back what a terminated run of this move (the same keys) may have left, as if it had failed there:
   * `volumes move --cancel` of a terminated move (operations/move-operations.ts reads what that run had asked for).
   */
  rollBackOnly?: AbandonedMove;
}

/** What a terminated run of a move had asked for, from its history: what its rollback must undo. */
export interface AbandonedMove {
  /** The target pool its pull completed in, where its adopt may have made the new volume (none: no pull done). */
  adoptedOn?: string;
  /** Its claim's switch, had it begun (undone, or the rollback stops if the claim is the copy's). */
  switching?: SwitchInput;
}

/**
 * A move that ended: `moved` (Kubernetes: the claim bound, under its name, to a new PV that names the new volume;
 * the old PV and volume deleted), or `copied` (a controller without Kubernetes: the new volume is on the target,
 * verified; the source volume is untouched and still the one the CO uses).
 */
export interface MoveVolumeResult {
  outcome: 'moved' | 'copied';
  volumeId: string;
  newVolumeId: string;
  sourceNodeId: string;
  targetNodeId: string;
  capacityBytes: number;
  /** Of the pull that completed: what it fetched and the checkpoint it resumed from (0: from the start). */
  fetchedBytes: number;
  resumedFromChunk: number;
  chunkCount: number;
  /** Moved: the claim (namespace/name) and the PV that now names the new volume. */
  claim?: string;
  persistentVolume?: string;
}

/** A step that could not be done: why, and the failure type the move fails with after it rolled back. */
class MoveStopped extends Error {
  constructor(
    readonly type: string,
    message: string,
    /** The node declared gone for good, if that is what stopped the move. */
    readonly forgotten?: ForgetNotice,
  ) {
    super(message);
  }
}

/**
 * The claim's steps, on the control queue (the controller's Kubernetes client): retried while they wait on the
 * cluster (a Pod still on the old node, a binding not done yet: Unavailable, which `volumes describe` shows as the
 * last failure), stopped by what cannot be finished (FailedPrecondition, NotFound: the move rolls back).
 */
const claims = proxyActivities<ControlActivities>({
  startToCloseTimeout: '2m',
  heartbeatTimeout: '30s',
  retry: { initialInterval: '1s', maximumInterval: '10s', nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES] },
});

/**
 * Moves a volume to another node (issue 39; docs/volume-moves.md), each step an activity on the queue of the node that
 * does it, so that a node that is down keeps its step waiting until its agent returns (invariant 2): check (control:
 * with Kubernetes, the PV and its bound claim, read before anything is touched) -> hold (source: refused while the
 * volume is staged; nothing can stage it until the move ends) -> snapshot (source, reflinked where the pool can) ->
 * offer (source: the image hashed into a manifest, a token sealed to the target) -> pull (target: chunk by chunk,
 * checkpointed, verified; a retry resumes) -> adopt (target: the copy becomes a volume under a new key) -> switch
 * (control: the claim bound, under its name, to a new PV naming the copy) -> release (source: offer withdrawn,
 * snapshot deleted) -> retire (control: the old PV deleted; source: the old volume deleted) -> moved. Without
 * Kubernetes the move ends `copied` after the release, the source let go. A step that fails for good before the
 * switch is done (no room on the target, a copy that does not verify, a node forgotten, the claim deleted meanwhile)
 * rolls back: the new PV deleted and the old one's policy restored, the copy discarded, the offer withdrawn, the
 * snapshot deleted, the source let go, its data untouched.
 */
export async function moveVolume(input: MoveVolumeInput): Promise<MoveVolumeResult> {
  const { step, inCluster, onNode } = moveSteps(input);
  const { driverName, sourceNodeId, targetNodeId, moveKey } = input;
  if (input.rollBackOnly) {
    // Nothing is checked or made: every step of the rollback is idempotent and names what it undoes by its key.
    const stopped = new MoveStopped(FailureType.Aborted, `move ${moveKey} was terminated, and its rollback asked for`);
    const { adoptedOn, switching } = input.rollBackOnly;
    return CancellationScope.nonCancellable(async () => {
      // Terminated before its hold took over the one it replaced: that one's is let go too (a no-op otherwise).
      if (input.replacing !== undefined) await letGo({ ...input, moveKey: input.replacing }, step, onNode);
      return rollBack(input, step, onNode, stopped, { adoptedOn, switching });
    });
  }
  const snapshotName = `move-${moveKey}`;
  // Before anything is touched: a move in a cluster moves a bound claim's data, and is refused here otherwise.
  let moved: MovedClaim | undefined;
  try {
    moved = await inCluster('checking', `reading the claim of ${input.volumeId}`, () =>
      claims.readMovedClaim({ driverName, volumeId: input.volumeId }),
    );
  } catch (error) {
    if (!(error instanceof MoveStopped)) throw error;
    return refuse(input.volumeId, input.targetNodeId, error);
  }
  const fence = fenceOf(input);
  let pulled: NodePullResult | undefined;
  let adopted: Awaited<ReturnType<NodeActivities['adoptMoveOnNode']>> | undefined;
  /** Set once the adopt is asked for: the target pool it may have made the new volume in. */
  let adoptedOn: string | undefined;
  let switching: SwitchInput | undefined;
  let switched: { claimUid: string } | undefined;
  try {
    await step('holding', sourceNodeId, `holding ${input.volumeId} for its move`, () =>
      onNode(sourceNodeId, `hold ${input.volumeId} for move ${moveKey}`).fenceMoveOnNode({
        ...fence,
        ...(input.replacing === undefined ? {} : { replacing: input.replacing }),
      }),
    );
    await step('snapshotting', sourceNodeId, `snapshot of ${input.volumeId} for its move`, () =>
      proxyActivities<NodeActivities>(
        snapshotOptions(driverName, sourceNodeId, `snapshot ${input.volumeId} to move it to ${targetNodeId}`),
      ).createSnapshotOnNode({
        snapshotKey: input.snapshotKey,
        sourceKey: input.sourceKey,
        sourcePoolIdPrefix: input.poolIdPrefix,
        name: snapshotName,
      }),
    );
    let offer: NodeOfferResult;
    ({ offer, pulled } = await copyToTarget(input, step, onNode, input.snapshotKey, `move ${moveKey}`));
    adoptedOn = pulled.poolId;
    adopted = await step('adopting', targetNodeId, 'adopting the copy as a volume', () =>
      onNode(targetNodeId, `adopt move ${moveKey} as volume ${input.newKey}`).adoptMoveOnNode({
        moveKey,
        key: input.newKey,
        name: snapshotName,
        capacityBytes: offer.sizeBytes,
        ...(offer.accessType === undefined ? {} : { accessType: offer.accessType }),
        ...(offer.fsType === undefined ? {} : { fsType: offer.fsType }),
      }),
    );
    if (moved) {
      const claimed = moved;
      switching = {
        driverName,
        moveWorkflowId: workflowInfo().workflowId,
        oldVolumeId: input.volumeId,
        newVolumeId: newVolumeIdOf(adopted, targetNodeId),
        targetNodeId,
        newPvName: movedObjectName(moved.pv.name, moveKey),
        moved,
      };
      const switchInput = switching;
      const where = `claim ${claimed.claim.namespace}/${claimed.claim.name}`;
      await inCluster('switching', `a new PersistentVolume for ${where}`, () => claims.prepareMovedSwitch(switchInput));
      switched = await inCluster('switching', `${where} bound to the copy`, () => claims.switchMovedClaim(switchInput));
    }
  } catch (error) {
    const made = { adoptedOn, switching };
    // Cancelled (the Temporal UI, `volumes move --cancel`) before the claim is the copy's: rolled back like a failure,
    // to the end, whatever is asked of it meanwhile.
    if (isCancellation(error)) {
      const cancelled = new MoveStopped(FailureType.Aborted, 'the move was cancelled');
      return CancellationScope.nonCancellable(() => rollBack(input, step, onNode, cancelled, made));
    }
    if (!(error instanceof MoveStopped)) throw error;
    return rollBack(input, step, onNode, error, made);
  }
  // From here the claim is the copy's (or, without Kubernetes, the copy is made): a cancellation no longer stops it.
  return CancellationScope.nonCancellable(() =>
    finish(input, step, onNode, inCluster, { adopted: adopted!, pulled: pulled!, switching, switched }),
  );
}

/**
 * What every step of a move goes through (a volume's or a snapshot's): a step on a node shows the phase and the node
 * it waits on, and is raced against that node's forget; a step in the cluster (the control queue) shows its phase.
 */
function moveSteps(input: {
  driverName: string;
  sourceNodeId: string;
  targetNodeId: string;
  sourceLive?: boolean;
  targetLive?: boolean;
}): { step: Step; inCluster: InCluster; onNode: OnNode } {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  const { driverName, sourceNodeId, targetNodeId } = input;
  const live = new Map<string, boolean | undefined>([
    [sourceNodeId, input.sourceLive],
    [targetNodeId, input.targetLive],
  ]);
  let shownNode = sourceNodeId; // the client started the move showing the source's node and phase
  let first = true;

  /** One step on one node: the phase and the node it waits on shown, the step raced against that node's forget. */
  const step = async <T>(phase: MovePhase, nodeId: string, doing: string, work: () => Promise<T>): Promise<T> => {
    if (nodeId !== shownNode) upsertSearchAttributes([{ key: NodeIdKey, value: nodeId }]);
    shownNode = nodeId;
    liveness.waitOn({ nodeId, doing, phase }, live.get(nodeId), first ? workflowInfo().startTime : new Date());
    first = false;
    try {
      const result = await untilForgotten(nodeId, work);
      // It answered: live now, whatever the start said (the next step on it must not show it waited for).
      if (!result.forgotten) live.set(nodeId, true);
      if (result.forgotten) {
        const { notice } = result;
        throw new MoveStopped(FailureType.NotFound, `node ${nodeId} was forgotten (${notice.reason})`, notice);
      }
      return result.value;
    } catch (error) {
      throw asStopped(error, doing);
    } finally {
      liveness.stop();
    }
  };
  /** A step of the claim's, on the control queue: no node to wait on. */
  const inCluster = async <T>(phase: MovePhase, doing: string, work: () => Promise<T>): Promise<T> => {
    upsertSearchAttributes([{ key: PhaseKey, value: phase }]);
    setCurrentDetails(`${phase}: ${doing}`);
    try {
      return await work();
    } catch (error) {
      throw asStopped(error, doing);
    }
  };

  const onNode = (nodeId: string, summary: string) =>
    proxyActivities<NodeActivities>(moveOptions(driverName, nodeId, summary));
  return { step, inCluster, onNode };
}

/**
 * The end of a move whose copy is the target's volume: what the source kept for the move goes (a source forgotten
 * now took the volume with it; the new volume stands, the snapshot is written off on its record); with the claim
 * switched, the old PV and volume are retired; without Kubernetes, the source is let go.
 */
async function finish(
  input: MoveVolumeInput,
  step: Step,
  onNode: OnNode,
  inCluster: InCluster,
  done: {
    adopted: Awaited<ReturnType<NodeActivities['adoptMoveOnNode']>>;
    pulled: NodePullResult;
    switching: SwitchInput | undefined;
    switched: { claimUid: string } | undefined;
  },
): Promise<MoveVolumeResult> {
  const { sourceNodeId, targetNodeId } = input;
  const { adopted, pulled, switching, switched } = done;
  const left = [await releaseSource(input, step, onNode)];
  const newVolumeId = newVolumeIdOf(adopted, targetNodeId);
  const result: MoveVolumeResult = {
    outcome: switching ? 'moved' : 'copied',
    volumeId: input.volumeId,
    newVolumeId,
    sourceNodeId,
    targetNodeId,
    capacityBytes: adopted.capacityBytes,
    fetchedBytes: pulled.fetchedBytes,
    resumedFromChunk: pulled.resumedFromChunk,
    chunkCount: pulled.chunkCount,
  };
  if (switching && switched) {
    left.push(await retire(input, step, onNode, inCluster, switching));
    result.claim = `${switching.moved.claim.namespace}/${switching.moved.claim.name}`;
    result.persistentVolume = switching.newPvName;
  } else {
    left.push(await letGo(input, step, onNode));
  }
  upsertSearchAttributes([{ key: PhaseKey, value: result.outcome satisfies MovePhase }]);
  const what = left.filter(Boolean).map((words) => `; ${words}`);
  setCurrentDetails(
    (result.claim
      ? `moved: claim ${result.claim} is bound to ${result.persistentVolume}, volume ${newVolumeId} on ` +
        `${targetNodeId}; ${input.volumeId} deleted`
      : `copied: ${newVolumeId} on ${targetNodeId}; ${input.volumeId} is untouched (no Kubernetes to switch)`) +
      what.join(''),
  );
  return result;
}

type Step = <T>(phase: MovePhase, nodeId: string, doing: string, work: () => Promise<T>) => Promise<T>;
type InCluster = <T>(phase: MovePhase, doing: string, work: () => Promise<T>) => Promise<T>;
type OnNode = (nodeId: string, summary: string) => NodeActivities;

function newVolumeIdOf(adopted: { nodeId?: string; poolId: string; key: string }, targetNodeId: string): string {
  return formatVolumeId({
    nodeId: adopted.nodeId ?? targetNodeId,
    poolIdPrefix: poolIdPrefix(adopted.poolId),
    key: adopted.key,
  });
}

/** An activity's failure for good as a MoveStopped (its type kept); anything else passes. */
function asStopped(error: unknown, doing: string): unknown {
  if (error instanceof MoveStopped) return error;
  if (error instanceof ActivityFailure && error.cause instanceof ApplicationFailure) {
    return new MoveStopped(error.cause.type ?? FailureType.Internal, `${doing}: ${error.cause.message}`);
  }
  return error;
}

/** Refused before anything was touched (the claim's check): fails with its type, nothing to roll back. */
function refuse(id: string, targetNodeId: string, stop: MoveStopped): never {
  upsertSearchAttributes([{ key: PhaseKey, value: 'rolled-back' satisfies MovePhase }]);
  const message = `the move of ${id} to ${targetNodeId} was refused, nothing touched: ${stop.message}`;
  setCurrentDetails(message);
  throw ApplicationFailure.create({ type: stop.type, message, nonRetryable: true });
}

/**
 * After the switch: the old PV deleted, then the old volume on its node (the claim is the new volume's now, so
 * nothing is rolled back from here: a step that cannot be done is said, and what it left is the orphan report's). A
 * source forgotten meanwhile: the old volume is written off on its record.
 */
async function retire(
  input: MoveVolumeInput,
  step: Step,
  onNode: OnNode,
  inCluster: InCluster,
  switching: SwitchInput,
): Promise<string | undefined> {
  const { sourceNodeId, moveKey } = input;
  try {
    await inCluster('retiring', `deleting PersistentVolume ${switching.moved.pv.name}`, () =>
      claims.retireMovedPv(switching),
    );
    await step('retiring', sourceNodeId, `deleting ${input.volumeId}`, () =>
      onNode(sourceNodeId, `delete moved volume ${input.volumeId} (move ${moveKey})`).deleteVolumeOnNode({
        key: input.sourceKey,
        poolIdPrefix: input.poolIdPrefix,
      }),
    );
    return undefined;
  } catch (error) {
    if (!(error instanceof MoveStopped)) throw error;
    if (error.forgotten) {
      await recordWriteOff(input.driverName, sourceNodeId, {
        volumeId: input.volumeId,
        key: input.sourceKey,
        poolIdPrefix: input.poolIdPrefix,
        reason: error.forgotten.reason,
      });
    }
    return `left on ${sourceNodeId}: ${error.message}`;
  }
}

/** What the move's hold on its source names: the move, the volume, its pool and where it goes. */
function fenceOf(input: MoveVolumeInput) {
  const { moveKey, sourceKey: key, poolIdPrefix, targetNodeId } = input;
  return { moveKey, key, poolIdPrefix, targetNodeId };
}

/** The source volume let go by the move (it stays the CO's): stageable again. */
async function letGo(input: MoveVolumeInput, step: Step, onNode: OnNode): Promise<string | undefined> {
  const { sourceNodeId, moveKey } = input;
  const fence = fenceOf(input);
  try {
    await step('releasing', sourceNodeId, `letting ${input.volumeId} go`, () =>
      onNode(sourceNodeId, `let ${input.volumeId} go (move ${moveKey})`).unfenceMoveOnNode(fence),
    );
    return undefined;
  } catch (error) {
    if (!(error instanceof MoveStopped)) throw error;
    return error.forgotten ? undefined : `${input.volumeId} still held on ${sourceNodeId}: ${error.message}`;
  }
}

/**
 * The source's offer withdrawn and the move's snapshot deleted (both idempotent). A source forgotten meanwhile: the
 * snapshot is written off on its record. Another failure for good (which neither should have) is said, not thrown:
 * what it left is the orphan report's. Returns what was left, in words, or undefined.
 */
async function releaseSource(input: MoveVolumeInput, step: Step, onNode: OnNode): Promise<string | undefined> {
  const { sourceNodeId, moveKey } = input;
  try {
    await step('releasing', sourceNodeId, 'withdrawing the offer', () =>
      onNode(sourceNodeId, `withdraw move ${moveKey}`).withdrawMoveOnNode({ moveKey }),
    );
    await step('releasing', sourceNodeId, "deleting the move's snapshot", () =>
      onNode(sourceNodeId, `delete move ${moveKey}'s snapshot`).deleteSnapshotOnNode({
        key: input.snapshotKey,
        poolIdPrefix: input.poolIdPrefix,
      }),
    );
    return undefined;
  } catch (error) {
    if (!(error instanceof MoveStopped)) throw error;
    if (error.forgotten) await writeOffSnapshot(input, error.forgotten.reason);
    return `left on ${sourceNodeId}: ${error.message}`;
  }
}

/**
 * Undoes what the move made, the source volume untouched: the source's offer and snapshot, the target's staged copy.
 * A node forgotten meanwhile is not waited for: what it may hold is written off on its record (the snapshot), or left
 * for the orphan report (a staged copy; a volume an adopt made is written off). Then the move fails with the type of
 * what stopped it.
 */
async function rollBack(
  input: MoveVolumeInput,
  step: Step,
  onNode: OnNode,
  stopped: MoveStopped,
  made: { adoptedOn: string | undefined; switching: SwitchInput | undefined },
): Promise<never> {
  const { sourceNodeId, targetNodeId, moveKey } = input;
  const { adoptedOn, switching } = made;
  const gone = stopped.forgotten?.nodeId;
  const left: string[] = [];
  // The cluster first: no PV may name the copy once it is deleted below.
  if (switching) {
    upsertSearchAttributes([{ key: PhaseKey, value: 'rolling-back' satisfies MovePhase }]);
    try {
      const kept = await claims.undoMovedSwitch(switching);
      if (kept) left.push(kept);
    } catch (error) {
      const stop = asStopped(error, 'undoing the switch');
      if (!(stop instanceof MoveStopped)) throw stop;
      // The claim is the copy's after all (bound to it): the copy is kept, and so is the source.
      const message = `the move of ${input.volumeId} could not be rolled back: ${stop.message}`;
      setCurrentDetails(message);
      throw ApplicationFailure.create({ type: FailureType.Internal, message, nonRetryable: true });
    }
  }
  // The target first, the source last: the move's node attribute ends on the source, whose volume it names.
  if (gone !== targetNodeId) {
    // An adopt that failed for good may have made the volume first (its create done, the staging's removal
    // failing): the new key, never issued to anyone, is deleted from the pool it was made in ('absent' if not).
    const deleteAdopted =
      adoptedOn === undefined
        ? undefined
        : () =>
            onNode(targetNodeId, `delete move ${moveKey}'s volume`).deleteVolumeOnNode({
              key: input.newKey,
              poolIdPrefix: poolIdPrefix(adoptedOn),
            });
    left.push((await discardOnTarget(input, step, onNode, deleteAdopted)) ?? '');
  }
  if (gone === sourceNodeId) await writeOffSnapshot(input, stopped.forgotten!.reason);
  else {
    left.push((await releaseSource(input, step, onNode)) ?? '');
    left.push((await letGo(input, step, onNode)) ?? '');
  }
  if (gone === targetNodeId) {
    // The adopt may have run before the node went: the new key is kept on the target's record, deleted there should
    // the node return (on whatever pool it returns with: the key was never issued to anyone).
    await recordWriteOff(input.driverName, targetNodeId, {
      volumeId: formatVolumeId({ nodeId: targetNodeId, poolIdPrefix: input.poolIdPrefix, key: input.newKey }),
      key: input.newKey,
      poolIdPrefix: input.poolIdPrefix,
      reason: stopped.forgotten!.reason,
      anyPool: true,
    });
  }
  upsertSearchAttributes([{ key: PhaseKey, value: 'rolled-back' satisfies MovePhase }]);
  const message =
    `the move of ${input.volumeId} to ${targetNodeId} rolled back, the volume untouched on ${sourceNodeId}: ` +
    stopped.message +
    left
      .filter(Boolean)
      .map((what) => `; ${what}`)
      .join('');
  setCurrentDetails(message);
  throw ApplicationFailure.create({ type: stopped.type, message, nonRetryable: true });
}

/**
 * The copy, a volume's move's or a snapshot's: the source offers the snapshot `snapshotKey` (hashed, a token sealed to
 * the target), then the target pulls it (checkpointed, verified; a retry resumes). `what` names the move in the
 * activities' summaries.
 */
async function copyToTarget(
  input: { moveKey: string; sourceNodeId: string; targetNodeId: string; poolIdPrefix: string; targetPublicKey: string },
  step: Step,
  onNode: OnNode,
  snapshotKey: string,
  what: string,
): Promise<{ offer: NodeOfferResult; pulled: NodePullResult }> {
  const { moveKey, sourceNodeId, targetNodeId } = input;
  const offer = await step('offering', sourceNodeId, `offer of the move to ${targetNodeId}`, () =>
    onNode(sourceNodeId, `offer ${what} to ${targetNodeId}`).offerMoveOnNode({
      moveKey,
      snapshotKey,
      poolIdPrefix: input.poolIdPrefix,
      targetPublicKey: input.targetPublicKey,
    }),
  );
  const pulled = await step('pulling', targetNodeId, `copy from ${sourceNodeId}`, () =>
    onNode(targetNodeId, `pull move ${moveKey} from ${sourceNodeId}`).pullMoveOnNode({
      moveKey,
      source: offer.source,
      offer: offer.offer,
    }),
  );
  return { offer, pulled };
}

/**
 * The target's part of a rollback (a volume's move or a snapshot's): what its adopt may have made deleted
 * (`deleteAdopted`, once the pull had completed), then the staged copy discarded. What could not be is said, not thrown.
 */
async function discardOnTarget(
  input: { targetNodeId: string; moveKey: string },
  step: Step,
  onNode: OnNode,
  deleteAdopted: (() => Promise<unknown>) | undefined,
): Promise<string | undefined> {
  const { targetNodeId, moveKey } = input;
  try {
    if (deleteAdopted) await step('rolling-back', targetNodeId, 'deleting what the adopt made', deleteAdopted);
    await step('rolling-back', targetNodeId, 'discarding the staged copy', () =>
      onNode(targetNodeId, `discard move ${moveKey}`).discardMoveOnNode({ moveKey }),
    );
    return undefined;
  } catch (error) {
    if (!(error instanceof MoveStopped)) throw error;
    return `left on ${targetNodeId}: ${error.message}`;
  }
}

async function writeOffSnapshot(input: MoveVolumeInput, reason: string): Promise<void> {
  const where = { nodeId: input.sourceNodeId, poolIdPrefix: input.poolIdPrefix, key: input.snapshotKey };
  await recordWriteOff(input.driverName, input.sourceNodeId, {
    volumeId: formatSnapshotId(where),
    key: input.snapshotKey,
    poolIdPrefix: input.poolIdPrefix,
    reason,
    kind: 'snapshot',
  });
}

/* A snapshot's move (docs/volume-moves.md, "Snapshots"): the same copy, a snapshot adopted, a VolumeSnapshot made again. */

export interface MoveSnapshotInput {
  driverName: string;
  snapshotId: string;
  /** The snapshot's node, pool prefix and key (parsed from its ID by the client that started the move). */
  sourceNodeId: string;
  poolIdPrefix: string;
  sourceKey: string;
  targetNodeId: string;
  targetPublicKey: string;
  /** Drawn at random by the client that started this run, so every retry of a step asks for the same. */
  moveKey: string;
  /** The new snapshot's key on the target. */
  newKey: string;
  sourceLive?: boolean;
  targetLive?: boolean;
  /** Only roll back what a terminated run of this move may have left (`snapshots move --cancel`), as for a volume's. */
  rollBackOnly?: { adoptedOn?: string; switching?: SnapshotSwitchInput };
}

/**
 * `moved` (Kubernetes: the VolumeSnapshot, under its name, bound to a new content that names the new snapshot; the old
 * content and snapshot deleted) or `copied` (no Kubernetes: the new snapshot is on the target, the old untouched).
 */
export interface MoveSnapshotResult {
  outcome: 'moved' | 'copied';
  snapshotId: string;
  newSnapshotId: string;
  sourceNodeId: string;
  targetNodeId: string;
  sizeBytes: number;
  fetchedBytes: number;
  resumedFromChunk: number;
  chunkCount: number;
  /** Moved: the VolumeSnapshot (namespace/name) and the content that now names the new snapshot. */
  volumeSnapshot?: string;
  content?: string;
}

/**
 * Moves a snapshot to another node: the volume move's copy without its hold or its snapshot (a snapshot is already a
 * copy of one instant, and nothing writes to it): check (control: with Kubernetes, the content naming the snapshot
 * and its bound VolumeSnapshot; a group's member is refused) -> offer (source) -> pull (target) -> adopt (target:
 * the copy becomes a snapshot under a new key, keeping the source volume's ID, size, shape and creation time) ->
 * switch (control: the VolumeSnapshot made again under its name, pre-provisioned, bound to a new content naming the
 * copy) -> release (source: offer withdrawn) -> retire (control: the old content deleted, being Retain; source: the
 * old snapshot deleted) -> moved. Without Kubernetes it ends `copied` after the release. A step that fails for good
 * before the switch (the VolumeSnapshot deleted meanwhile, the snapshot deleted on its node, no room, a node
 * forgotten) rolls back: the new content deleted and the old one's policy restored, the copy deleted, the offer
 * withdrawn; the snapshot untouched.
 */
export async function moveSnapshot(input: MoveSnapshotInput): Promise<MoveSnapshotResult> {
  const { step, inCluster, onNode } = moveSteps(input);
  const { driverName, targetNodeId, moveKey, snapshotId } = input;
  if (input.rollBackOnly) {
    const stopped = new MoveStopped(FailureType.Aborted, `move ${moveKey} was terminated, and its rollback asked for`);
    const made = { adoptedOn: input.rollBackOnly.adoptedOn, switching: input.rollBackOnly.switching };
    return CancellationScope.nonCancellable(() => rollBackSnapshot(input, step, onNode, stopped, made));
  }
  let moved: MovedSnapshot | undefined;
  try {
    moved = await inCluster('checking', `reading the VolumeSnapshot of ${snapshotId}`, () =>
      claims.readMovedSnapshot({ driverName, snapshotId }),
    );
  } catch (error) {
    if (!(error instanceof MoveStopped)) throw error;
    return refuse(snapshotId, targetNodeId, error);
  }
  let pulled: NodePullResult | undefined;
  let adopted: NodeSnapshotResult | undefined;
  let adoptedOn: string | undefined;
  let switching: SnapshotSwitchInput | undefined;
  let switched: { snapshotUid: string } | undefined;
  try {
    let offer: NodeOfferResult;
    ({ offer, pulled } = await copyToTarget(input, step, onNode, input.sourceKey, `move ${moveKey} of ${snapshotId}`));
    adoptedOn = pulled.poolId;
    adopted = await step('adopting', targetNodeId, 'adopting the copy as a snapshot', () =>
      onNode(targetNodeId, `adopt move ${moveKey} as snapshot ${input.newKey}`).adoptMovedSnapshotOnNode({
        moveKey,
        key: input.newKey,
        // As a moved volume's: a name of the move's own (the running move's VolumeName, which the orphan report
        // knows), never one the target's pool could already answer by.
        name: `move-${moveKey}`,
        sizeBytes: offer.sizeBytes,
        ...(offer.accessType === undefined ? {} : { accessType: offer.accessType }),
        ...(offer.fsType === undefined ? {} : { fsType: offer.fsType }),
        snapshot: offer.snapshot,
      }),
    );
    if (moved) {
      const { namespace, name } = moved.snapshot;
      switching = {
        driverName,
        moveWorkflowId: workflowInfo().workflowId,
        oldSnapshotId: snapshotId,
        newSnapshotId: newSnapshotIdOf(adopted),
        targetNodeId,
        newContentName: movedObjectName(moved.content.name, moveKey),
        moved,
      };
      const switchInput = switching;
      const where = `VolumeSnapshot ${namespace}/${name}`;
      await inCluster('switching', `a new VolumeSnapshotContent for ${where}`, () =>
        claims.prepareSnapshotSwitch(switchInput),
      );
      switched = await inCluster('switching', `${where} bound to the copy`, () =>
        claims.switchMovedSnapshot(switchInput),
      );
    }
  } catch (error) {
    const made = { adoptedOn, switching };
    if (isCancellation(error)) {
      const cancelled = new MoveStopped(FailureType.Aborted, 'the move was cancelled');
      return CancellationScope.nonCancellable(() => rollBackSnapshot(input, step, onNode, cancelled, made));
    }
    if (!(error instanceof MoveStopped)) throw error;
    return rollBackSnapshot(input, step, onNode, error, made);
  }
  const done = { adopted: adopted!, pulled: pulled!, switching, switched };
  return CancellationScope.nonCancellable(() => finishSnapshot(input, step, onNode, inCluster, done));
}

function newSnapshotIdOf(adopted: NodeSnapshotResult): string {
  return formatSnapshotId({ nodeId: adopted.nodeId, poolIdPrefix: poolIdPrefix(adopted.poolId), key: adopted.key });
}

/** The offer withdrawn (the source keeps its snapshot until the switch is done); said, not thrown, when it cannot be. */
async function withdrawOffer(input: MoveSnapshotInput, step: Step, onNode: OnNode): Promise<string | undefined> {
  const { sourceNodeId, moveKey } = input;
  try {
    await step('releasing', sourceNodeId, 'withdrawing the offer', () =>
      onNode(sourceNodeId, `withdraw move ${moveKey}`).withdrawMoveOnNode({ moveKey }),
    );
    return undefined;
  } catch (error) {
    if (!(error instanceof MoveStopped)) throw error;
    return error.forgotten ? undefined : `left on ${sourceNodeId}: ${error.message}`;
  }
}

async function finishSnapshot(
  input: MoveSnapshotInput,
  step: Step,
  onNode: OnNode,
  inCluster: InCluster,
  done: {
    adopted: NodeSnapshotResult;
    pulled: NodePullResult;
    switching: SnapshotSwitchInput | undefined;
    switched: { snapshotUid: string } | undefined;
  },
): Promise<MoveSnapshotResult> {
  const { snapshotId, sourceNodeId, targetNodeId, moveKey } = input;
  const { adopted, pulled, switching, switched } = done;
  const left = [await withdrawOffer(input, step, onNode)];
  const result: MoveSnapshotResult = {
    outcome: switching ? 'moved' : 'copied',
    snapshotId,
    newSnapshotId: newSnapshotIdOf(adopted),
    sourceNodeId,
    targetNodeId,
    sizeBytes: adopted.sizeBytes,
    fetchedBytes: pulled.fetchedBytes,
    resumedFromChunk: pulled.resumedFromChunk,
    chunkCount: pulled.chunkCount,
  };
  if (switching && switched) {
    // The old content first (Retain: its deletion deletes nothing), then the old snapshot on its node.
    try {
      await inCluster('retiring', `deleting VolumeSnapshotContent ${switching.moved.content.name}`, () =>
        claims.retireMovedSnapshotContent(switching),
      );
      await step('retiring', sourceNodeId, `deleting ${snapshotId}`, () =>
        onNode(sourceNodeId, `delete moved snapshot ${snapshotId} (move ${moveKey})`).deleteSnapshotOnNode({
          key: input.sourceKey,
          poolIdPrefix: input.poolIdPrefix,
        }),
      );
    } catch (error) {
      if (!(error instanceof MoveStopped)) throw error;
      if (error.forgotten) {
        await recordWriteOff(input.driverName, sourceNodeId, {
          volumeId: snapshotId,
          key: input.sourceKey,
          poolIdPrefix: input.poolIdPrefix,
          reason: error.forgotten.reason,
          kind: 'snapshot',
        });
      }
      left.push(`left on ${sourceNodeId}: ${error.message}`);
    }
    result.volumeSnapshot = `${switching.moved.snapshot.namespace}/${switching.moved.snapshot.name}`;
    result.content = switching.newContentName;
  }
  upsertSearchAttributes([{ key: PhaseKey, value: result.outcome satisfies MovePhase }]);
  setCurrentDetails(
    (result.volumeSnapshot
      ? `moved: VolumeSnapshot ${result.volumeSnapshot} is bound to ${result.content}, snapshot ` +
        `${result.newSnapshotId} on ${targetNodeId}; ${snapshotId} deleted`
      : `copied: ${result.newSnapshotId} on ${targetNodeId}; ${snapshotId} is untouched (no Kubernetes to switch)`) +
      left
        .filter(Boolean)
        .map((words) => `; ${words}`)
        .join(''),
  );
  return result;
}

/**
 * Undoes what a snapshot's move made, the snapshot untouched: the cluster first (no content may name the copy once it
 * is deleted), then the target's copy (the adopted snapshot, the staged copy), then the source's offer. A target
 * forgotten meanwhile: the new key is written off on its record (the adopt may have run).
 */
async function rollBackSnapshot(
  input: MoveSnapshotInput,
  step: Step,
  onNode: OnNode,
  stopped: MoveStopped,
  made: { adoptedOn: string | undefined; switching: SnapshotSwitchInput | undefined },
): Promise<never> {
  const { snapshotId, sourceNodeId, targetNodeId, moveKey } = input;
  const gone = stopped.forgotten?.nodeId;
  const left: (string | undefined)[] = [];
  if (made.switching) {
    upsertSearchAttributes([{ key: PhaseKey, value: 'rolling-back' satisfies MovePhase }]);
    const switching = made.switching;
    try {
      left.push(await claims.undoSnapshotSwitch(switching));
    } catch (error) {
      const stop = asStopped(error, 'undoing the switch');
      if (!(stop instanceof MoveStopped)) throw stop;
      const message = `the move of ${snapshotId} could not be rolled back: ${stop.message}`;
      setCurrentDetails(message);
      throw ApplicationFailure.create({ type: FailureType.Internal, message, nonRetryable: true });
    }
  }
  if (gone !== targetNodeId) {
    const { adoptedOn } = made;
    const deleteAdopted =
      adoptedOn === undefined
        ? undefined
        : () =>
            onNode(targetNodeId, `delete move ${moveKey}'s snapshot`).deleteSnapshotOnNode({
              key: input.newKey,
              poolIdPrefix: poolIdPrefix(adoptedOn),
            });
    left.push(await discardOnTarget(input, step, onNode, deleteAdopted));
  } else {
    await recordWriteOff(input.driverName, targetNodeId, {
      volumeId: formatSnapshotId({ nodeId: targetNodeId, poolIdPrefix: input.poolIdPrefix, key: input.newKey }),
      key: input.newKey,
      poolIdPrefix: input.poolIdPrefix,
      reason: stopped.forgotten!.reason,
      kind: 'snapshot',
      anyPool: true,
    });
  }
  if (gone !== sourceNodeId) left.push(await withdrawOffer(input, step, onNode));
  upsertSearchAttributes([{ key: PhaseKey, value: 'rolled-back' satisfies MovePhase }]);
  const message =
    `the move of ${snapshotId} to ${targetNodeId} rolled back, the snapshot untouched on ${sourceNodeId}: ` +
    stopped.message +
    left
      .filter(Boolean)
      .map((what) => `; ${what}`)
      .join('');
  setCurrentDetails(message);
  throw ApplicationFailure.create({ type: stopped.type, message, nonRetryable: true });
}
