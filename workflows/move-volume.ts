import {
  ActivityFailure,
  ApplicationFailure,
  proxyActivities,
  setCurrentDetails,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { NodeActivities, NodeOfferResult, NodePullResult } from '../activities/node-activities';
import { FailureType } from '../common/failures';
import {
  NodeIdKey,
  PhaseKey,
  formatSnapshotId,
  formatVolumeId,
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
  /** The nodes' liveness as their records showed at the start (undefined: no record); drives the phase. */
  sourceLive?: boolean;
  targetLive?: boolean;
}

/**
 * A move that ended with the volume copied: the new volume (a new volume ID) is on the target, verified against the
 * source's manifest; the source volume is untouched and still the one the CO uses. Switching the CO over to the new
 * volume and deleting the old one after the switch is a later step (docs/volume-moves.md, "What is not built yet").
 */
export interface MoveVolumeResult {
  outcome: 'copied';
  volumeId: string;
  newVolumeId: string;
  sourceNodeId: string;
  targetNodeId: string;
  capacityBytes: number;
  /** Of the pull that completed: what it fetched and the checkpoint it resumed from (0: from the start). */
  fetchedBytes: number;
  resumedFromChunk: number;
  chunkCount: number;
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
 * Moves a volume's data to another node (issue 39; docs/volume-moves.md), each step an activity on the queue of the
 * node that does it, so that a node that is down keeps its step waiting until its agent returns (invariant 2):
 * snapshot on the source (a point-in-time copy, reflinked where the pool can) -> offer (source: the image hashed into a
 * manifest, a token sealed to the target) -> pull (target: chunk by chunk, checkpointed, verified; a retry resumes
 * from the checkpoint) -> adopt (target: the copy becomes a volume under a new key, journaled and counted as a restore
 * is) -> release (source: offer withdrawn, snapshot deleted) -> copied. A step that fails for good (no room on the
 * target, a copy that does not verify, a node forgotten) rolls back: the staged copy discarded, the offer withdrawn,
 * the snapshot deleted, the source volume untouched.
 */
export async function moveVolume(input: MoveVolumeInput): Promise<MoveVolumeResult> {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  const { driverName, sourceNodeId, targetNodeId, moveKey } = input;
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
      if (error instanceof MoveStopped) throw error;
      if (error instanceof ActivityFailure && error.cause instanceof ApplicationFailure) {
        throw new MoveStopped(error.cause.type ?? FailureType.Internal, `${doing}: ${error.cause.message}`);
      }
      throw error;
    } finally {
      liveness.stop();
    }
  };

  const onNode = (nodeId: string, summary: string) =>
    proxyActivities<NodeActivities>(moveOptions(driverName, nodeId, summary));
  const snapshotName = `move-${moveKey}`;
  let offered: NodeOfferResult | undefined;
  let pulled: NodePullResult | undefined;
  let adopted: Awaited<ReturnType<NodeActivities['adoptMoveOnNode']>> | undefined;
  /** Set once the adopt is asked for: the target pool it may have made the new volume in. */
  let adoptedOn: string | undefined;
  try {
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
    offered = await step('offering', sourceNodeId, `offer of the move to ${targetNodeId}`, () =>
      onNode(sourceNodeId, `offer move ${moveKey} to ${targetNodeId}`).offerMoveOnNode({
        moveKey,
        snapshotKey: input.snapshotKey,
        poolIdPrefix: input.poolIdPrefix,
        targetPublicKey: input.targetPublicKey,
      }),
    );
    const offer = offered;
    pulled = await step('pulling', targetNodeId, `copy from ${sourceNodeId}`, () =>
      onNode(targetNodeId, `pull move ${moveKey} from ${sourceNodeId}`).pullMoveOnNode({
        moveKey,
        source: offer.source,
        offer: offer.offer,
      }),
    );
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
  } catch (error) {
    if (!(error instanceof MoveStopped)) throw error;
    return rollBack(input, step, onNode, error, adoptedOn);
  }
  // The copy is the target's volume: what the source kept for the move goes. A source forgotten now took the
  // volume with it; the new volume stands, and the snapshot is written off on the source's record.
  const left = await releaseSource(input, step, onNode);
  const newVolumeId = formatVolumeId({
    nodeId: adopted.nodeId ?? targetNodeId,
    poolIdPrefix: poolIdPrefix(adopted.poolId),
    key: adopted.key,
  });
  upsertSearchAttributes([{ key: PhaseKey, value: 'copied' satisfies MovePhase }]);
  setCurrentDetails(
    `copied: ${newVolumeId} on ${targetNodeId}; ${input.volumeId} is untouched (the switch is a later step)` +
      (left ? `; ${left}` : ''),
  );
  return {
    outcome: 'copied',
    volumeId: input.volumeId,
    newVolumeId,
    sourceNodeId,
    targetNodeId,
    capacityBytes: adopted.capacityBytes,
    fetchedBytes: pulled.fetchedBytes,
    resumedFromChunk: pulled.resumedFromChunk,
    chunkCount: pulled.chunkCount,
  };
}

type Step = <T>(phase: MovePhase, nodeId: string, doing: string, work: () => Promise<T>) => Promise<T>;
type OnNode = (nodeId: string, summary: string) => NodeActivities;

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
  adoptedOn: string | undefined,
): Promise<never> {
  const { sourceNodeId, targetNodeId, moveKey } = input;
  const gone = stopped.forgotten?.nodeId;
  const left: string[] = [];
  // The target first, the source last: the move's node attribute ends on the source, whose volume it names.
  if (gone !== targetNodeId) {
    try {
      // An adopt that failed for good may have made the volume first (its create done, the staging's removal
      // failing): the new key, never issued to anyone, is deleted from the pool it was made in ('absent' if not).
      if (adoptedOn !== undefined)
        await step('rolling-back', targetNodeId, 'deleting what the adopt made', () =>
          onNode(targetNodeId, `delete move ${moveKey}'s volume`).deleteVolumeOnNode({
            key: input.newKey,
            poolIdPrefix: poolIdPrefix(adoptedOn),
          }),
        );
      await step('rolling-back', targetNodeId, 'discarding the staged copy', () =>
        onNode(targetNodeId, `discard move ${moveKey}`).discardMoveOnNode({ moveKey }),
      );
    } catch (error) {
      if (!(error instanceof MoveStopped)) throw error;
      left.push(`left on ${targetNodeId}: ${error.message}`);
    }
  }
  if (gone === sourceNodeId) await writeOffSnapshot(input, stopped.forgotten!.reason);
  else left.push((await releaseSource(input, step, onNode)) ?? '');
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
