import type { Client, WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { DriverError, FailureType, isFailureType } from '../common/failures';
import {
  NodeIdKey,
  OperationKey,
  PhaseKey,
  VolumeIdKey,
  VolumeNameKey,
  WaitingSinceKey,
  controlTaskQueue,
  inspectWorkflowId,
  isValidNodeId,
  listTransfersWorkflowId,
  moveWorkflowId,
  oneOffTag,
  ownsVolume,
  parseSnapshotId,
  parseVolumeId,
} from '../common/names';
import type { ListedTransfer } from '../workflows/listing';
import type { MoveSnapshotInput, MoveVolumeInput, MoveVolumeResult } from '../workflows/move-volume';
import type { NodePullResult } from '../activities/node-activities';
import type { SnapshotSwitchInput, SwitchInput } from '../activities/control-activities';
import type * as workflows from '../workflows';
import { readNodeRecord, type NodeRecordView } from '../node-records/reads';
import type { NodeView } from '../common/names';
import { formatBytes } from '../common/quantity';
import { pendingActivity } from './describe-volume';
import { newSnapshotKey } from './snapshot-key';
import { SnapshotOperations, silentNode } from './snapshot-operations';

/**
 * `durable-csi volumes move`: the checks that refuse a move before anything is made, the start (or the attach to the
 * move of the same volume, whose workflow ID is derived from the volume ID), and the progress an operator watches.
 * The move itself is workflows/move-volume.ts (docs/volume-moves.md).
 */

/** What the move's workflow keeps in its memo, so a second request can tell whether it asks for the same move. */
const MOVE_MEMO_KEY = 'move';
interface MoveMemo {
  targetNodeId: string;
  /** Absent from moves started before it was kept. */
  moveKey?: string;
}

export interface MoveStart {
  workflowId: string;
  /** True when a move of the volume to this node was already running or done: this request attached to it. */
  attached: boolean;
  /** Said when the source node is offline: the move waits for it. */
  note?: string;
}

/**
 * Starts the move of `volumeId` to `targetNodeId`, or attaches to the move of that volume to that node. Refused, with
 * nothing started: an ID this driver did not issue, a node ID that is not one, the volume's own node, a target that
 * is unknown, forgotten, offline or serves no copies, a source that is forgotten or whose pool was replaced, a
 * volume its (live) node does not hold, a target that runs another backend than the source, a move of the volume to
 * another node running or done.
 */
export async function startMove(
  client: Client,
  driverName: string,
  request: { volumeId: string; targetNodeId: string },
): Promise<MoveStart> {
  const { volumeId, targetNodeId } = request;
  const parts = parseVolumeId(volumeId);
  if (!parts) throw new DriverError(FailureType.InvalidArgument, `"${volumeId}" is not a volume ID this driver issued`);
  const ends = await checkMoveEnds(client, driverName, { kind: 'volume', id: volumeId, parts, targetNodeId });
  if ('attached' in ends) return ends;
  const { workflowId, existing, sourceNode, targetKey } = ends;
  let note: string | undefined;
  if (sourceNode.live) {
    const held = await client.workflow.execute<typeof workflows.inspectVolume>('inspectVolume', {
      workflowId: inspectWorkflowId(driverName, volumeId, oneOffTag()),
      taskQueue: controlTaskQueue(driverName),
      args: [{ driverName, ...parts }],
      workflowExecutionTimeout: '1m',
    });
    if (!held) throw new DriverError(FailureType.NotFound, `volume ${volumeId} does not exist on node ${parts.nodeId}`);
  } else {
    note =
      `node ${parts.nodeId} is offline: the move waits for it (its first step on it, holding the volume, waits in the node's ` +
      'queue); whether it holds the volume is known when it returns';
  }
  const input: MoveVolumeInput = {
    driverName,
    volumeId,
    sourceNodeId: parts.nodeId,
    poolIdPrefix: parts.poolIdPrefix,
    sourceKey: parts.key,
    targetNodeId,
    targetPublicKey: targetKey,
    moveKey: newSnapshotKey(),
    snapshotKey: newSnapshotKey(),
    newKey: newSnapshotKey(),
    sourceLive: sourceNode.live,
    targetLive: true,
    // A move terminated before it ended left its hold on the volume (it ran no code to let go): this one takes it over.
    ...(existing?.abandoned ? { replacing: existing.abandoned } : {}),
  };
  const started = await startMoveWorkflow(client, {
    type: 'moveVolume',
    input,
    workflowId,
    operation: 'move',
    id: volumeId,
    live: sourceNode.live,
  });
  if (!started) await existingMove(client, workflowId, `volume ${volumeId}`, targetNodeId);
  return { workflowId, attached: !started, ...(started && note !== undefined ? { note } : {}) };
}

/**
 * `snapshots move`: starts the move of `snapshotId` to `targetNodeId`, or attaches to it; refused as a volume's move
 * is (startMove), and also for a snapshot its live node does not hold or that is a member of a group snapshot (a
 * group moves whole or not at all). No hold: a snapshot is one instant already, and nothing writes to it.
 */
export async function startSnapshotMove(
  client: Client,
  driverName: string,
  request: { snapshotId: string; targetNodeId: string },
): Promise<MoveStart> {
  const { snapshotId, targetNodeId } = request;
  const parts = parseSnapshotId(snapshotId);
  if (!parts)
    throw new DriverError(FailureType.InvalidArgument, `"${snapshotId}" is not a snapshot ID this driver issued`);
  const what = `snapshot ${snapshotId}`;
  const ends = await checkMoveEnds(client, driverName, { kind: 'snapshot', id: snapshotId, parts, targetNodeId });
  if ('attached' in ends) return ends;
  const { workflowId, sourceNode, targetKey } = ends;
  let note: string | undefined;
  if (sourceNode.live) {
    const lookup = { nodeId: parts.nodeId, only: { poolIdPrefix: parts.poolIdPrefix, key: parts.key } };
    const page = await new SnapshotOperations(client, driverName).listPage('', 1, lookup);
    const held = page.snapshots.find((snapshot) => snapshot.snapshotId === snapshotId);
    if (page.unreachableNodes.length > 0) throw silentNode(parts.nodeId);
    if (!held) throw new DriverError(FailureType.NotFound, `${what} does not exist on node ${parts.nodeId}`);
    if (held.groupSnapshotId)
      throw new DriverError(
        FailureType.FailedPrecondition,
        `${what} is a member of group snapshot ${held.groupSnapshotId}: a group snapshot moves whole or not at all, ` +
          'and is not moved',
      );
  } else {
    note = `node ${parts.nodeId} is offline: the move waits for it (its first step on it, the offer, waits in the node's queue)`;
  }
  const input: MoveSnapshotInput = {
    driverName,
    snapshotId,
    sourceNodeId: parts.nodeId,
    poolIdPrefix: parts.poolIdPrefix,
    sourceKey: parts.key,
    targetNodeId,
    targetPublicKey: targetKey,
    moveKey: newSnapshotKey(),
    newKey: newSnapshotKey(),
    sourceLive: sourceNode.live,
    targetLive: true,
  };
  const started = await startMoveWorkflow(client, {
    type: 'moveSnapshot',
    input,
    workflowId,
    operation: 'snapshot-move',
    id: snapshotId,
    live: sourceNode.live,
  });
  if (!started) await existingMove(client, workflowId, what, targetNodeId);
  return { workflowId, attached: !started, ...(started && note !== undefined ? { note } : {}) };
}

/**
 * What a move checks first, a volume's or a snapshot's: the target a node ID; a move of the same ID running or done
 * (attached to when it goes to the same node, ALREADY_EXISTS otherwise); the ID already on the target; the source's
 * record (checkSource) and the target's (checkTarget). Answers the move to attach to, or what a new one starts from.
 */
async function checkMoveEnds(
  client: Client,
  driverName: string,
  move: {
    kind: 'volume' | 'snapshot';
    id: string;
    parts: { nodeId: string; poolIdPrefix: string };
    targetNodeId: string;
  },
): Promise<
  | MoveStart
  | {
      workflowId: string;
      existing: { abandoned?: string } | undefined;
      sourceNode: { live: boolean; backend: string };
      targetKey: string;
    }
> {
  const { kind, id, parts, targetNodeId } = move;
  if (!isValidNodeId(targetNodeId))
    throw new DriverError(FailureType.InvalidArgument, `--to "${targetNodeId}" is not a node ID`);
  const workflowId = moveWorkflowId(driverName, id);
  const existing = await existingMove(client, workflowId, `${kind} ${id}`, targetNodeId);
  if (existing === 'running' || existing === 'done') return { workflowId, attached: true };
  if (targetNodeId === parts.nodeId)
    throw new DriverError(FailureType.InvalidArgument, `${kind} ${id} is already on node ${targetNodeId}`);
  const [source, target] = await Promise.all([
    readNodeRecord(client, driverName, parts.nodeId),
    readNodeRecord(client, driverName, targetNodeId),
  ]);
  const sourceNode = checkSource(source, kind, id, parts);
  const targetKey = checkTarget(target, targetNodeId, sourceNode.backend, kind);
  return { workflowId, existing, sourceNode, targetKey };
}

/**
 * Starts a move's workflow (a volume's or a snapshot's) with what operators and the orphan report read: its memo, its
 * operation, the ID moved, the name of what it makes, its node and phase. False when another request started it
 * first (the caller checks that one asks for the same target).
 */
async function startMoveWorkflow(
  client: Client,
  move: {
    type: 'moveVolume' | 'moveSnapshot';
    input: MoveVolumeInput | MoveSnapshotInput;
    workflowId: string;
    operation: string;
    id: string;
    live: boolean;
  },
): Promise<boolean> {
  const { input, id } = move;
  const memo: MoveMemo = { targetNodeId: input.targetNodeId, moveKey: input.moveKey };
  try {
    await client.workflow.start(move.type, {
      workflowId: move.workflowId,
      taskQueue: controlTaskQueue(input.driverName),
      args: [input],
      // A run that rolled back may be tried again; one running or done is attached to (checked before, and here
      // against a request racing this one).
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      memo: { [MOVE_MEMO_KEY]: memo },
      staticSummary: `move ${id} to ${input.targetNodeId}`,
      typedSearchAttributes: [
        { key: OperationKey, value: move.operation },
        { key: VolumeIdKey, value: id },
        // The name of what the move makes (a volume's: its snapshot on the source; either's: the copy on the target):
        // the orphan report counts neither while the move runs.
        { key: VolumeNameKey, value: `move-${input.moveKey}` },
        { key: NodeIdKey, value: input.sourceNodeId },
        ...(move.live
          ? [{ key: PhaseKey, value: 'checking' }]
          : [
              { key: PhaseKey, value: 'waiting-for-node' },
              { key: WaitingSinceKey, value: new Date() },
            ]),
      ],
    });
    return true;
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return false;
  }
}

/**
 * A move of the volume running or done: to this node (attach), or to another (AlreadyExists); undefined: none, or
 * one that ended without an end of its own (terminated, timed out), whose move key is `abandoned`.
 */
async function existingMove(
  client: Client,
  workflowId: string,
  what: string,
  targetNodeId: string,
): Promise<'running' | 'done' | { abandoned?: string } | undefined> {
  let description;
  try {
    description = await client.workflow.getHandle(workflowId).describe();
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return undefined;
    throw error;
  }
  const status = description.status.name;
  const memo = description.memo?.[MOVE_MEMO_KEY] as MoveMemo | undefined;
  if (status === 'TERMINATED' || status === 'TIMED_OUT')
    return { ...(memo?.moveKey ? { abandoned: memo.moveKey } : {}) };
  if (status !== 'RUNNING' && status !== 'COMPLETED') return undefined;
  if (memo?.targetNodeId !== targetNodeId) {
    throw new DriverError(
      FailureType.AlreadyExists,
      status === 'RUNNING'
        ? `${what} is being moved to node ${memo?.targetNodeId ?? '?'} (${workflowId}); wait for it to end`
        : `${what} was moved (or copied) to node ${memo?.targetNodeId ?? '?'} (${workflowId}); that stands`,
    );
  }
  return status === 'RUNNING' ? 'running' : 'done';
}

/**
 * The target must be live, serve copies and run the source's backend (a loop volume is an image, a dir volume a
 * tree): a move does not start towards a node that cannot take it now.
 */
function checkTarget(
  record: NodeRecordView | undefined,
  nodeId: string,
  backend: string,
  kind: 'volume' | 'snapshot',
): string {
  if (record?.forgotten)
    throw new DriverError(
      FailureType.FailedPrecondition,
      `node ${nodeId} was forgotten (${record.forgotten.reason}): no ${kind} moves to it`,
    );
  const node = record?.node;
  if (!node) throw new DriverError(FailureType.NotFound, `node ${nodeId} is unknown: no agent has registered it`);
  if (!node.live)
    throw new DriverError(
      FailureType.Unavailable,
      `node ${nodeId} is offline (last heartbeat ${new Date(node.lastHeartbeat).toISOString()}): a ${kind} moves ` +
        'only to a live node',
    );
  if (node.backend !== backend)
    throw new DriverError(
      FailureType.FailedPrecondition,
      `node ${nodeId} runs the ${node.backend} backend: a ${backend} ${kind} moves only to a ${backend} pool ` +
        '(docs/volume-moves.md)',
    );
  if (!node.transfer)
    throw new DriverError(
      FailureType.FailedPrecondition,
      `node ${nodeId}'s agent serves no node-to-node copies: run it with --transfer-port and --transfer-address`,
    );
  return node.transfer.publicKey;
}

/** The source's record: forgotten, unknown, another pool or a backend without copies refuse the move. */
function checkSource(
  record: NodeRecordView | undefined,
  kind: 'volume' | 'snapshot',
  id: string,
  parts: { nodeId: string; poolIdPrefix: string },
): { live: boolean; backend: string } {
  const what = `${kind} ${id}`;
  if (record?.forgotten)
    throw new DriverError(
      FailureType.NotFound,
      `${what}'s node ${parts.nodeId} was forgotten (${record.forgotten.reason}): the ${kind} is gone with it`,
    );
  const node = record?.node;
  if (!node)
    throw new DriverError(
      FailureType.NotFound,
      `${what} names node ${parts.nodeId}, which is unknown: no agent has registered it`,
    );
  if (!ownsVolume(node.poolId, parts.poolIdPrefix))
    throw new DriverError(
      FailureType.NotFound,
      `${what} was made on a pool node ${parts.nodeId} no longer has (it runs pool ${node.poolId})`,
    );
  if (!MOVABLE_BACKENDS.includes(node.backend))
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${what} is on a ${node.backend} pool: only loop and dir pools' ${kind}s are moved (docs/volume-moves.md)`,
    );
  if (!node.transfer)
    throw new DriverError(
      FailureType.FailedPrecondition,
      `node ${parts.nodeId}'s agent serves no node-to-node copies: run it with --transfer-port and --transfer-address`,
    );
  return { live: node.live, backend: node.backend };
}

/** The backends whose volumes a move copies: loop (an image) and dir (a tree, as an archive). */
const MOVABLE_BACKENDS = ['loop', 'dir'];

/** What the moves have on the pools: every node's staged copies and offers, and the nodes not checked. */
export interface PoolTransfers {
  transfers: ListedTransfer[];
  unreachableNodes: string[];
  truncatedNodes: string[];
}

/**
 * Every node's transfers, a page of nodes after another (listTransfersPage), for the orphan report. A running move's
 * are there too: the caller tells them apart by their move key (the move's VolumeNameKey is `move-<key>`).
 */
export async function listPoolTransfers(client: Client, driverName: string): Promise<PoolTransfers> {
  const every: PoolTransfers = { transfers: [], unreachableNodes: [], truncatedNodes: [] };
  let after = '';
  do {
    const page = await client.workflow.execute<typeof workflows.listTransfersPage>('listTransfersPage', {
      workflowId: listTransfersWorkflowId(driverName, oneOffTag()),
      taskQueue: controlTaskQueue(driverName),
      args: [{ driverName, after }],
      workflowExecutionTimeout: '1m',
    });
    every.transfers.push(...page.transfers);
    every.unreachableNodes.push(...page.unreachableNodes);
    every.truncatedNodes.push(...page.truncatedNodes);
    after = page.nextToken;
  } while (after);
  return every;
}

/** One look at a running move, for the CLI's progress lines. */
export interface MoveProgressView {
  status: string;
  phase: string | null;
  nodeId: string | null;
  /** The pull's last heartbeat (activities/node-activities.ts MoveProgress), while it runs. */
  copied?: { phase: string; chunks: number; chunkCount: number; fetchedBytes: number; sizeBytes: number };
  /** A step waiting in a node's queue, or retried: what the pending activity says. */
  pending: string[];
}

export async function moveProgress(handle: WorkflowHandle): Promise<MoveProgressView> {
  const description = await handle.describe();
  const pending = (description.raw.pendingActivities ?? []).map(pendingActivity);
  const pull = pending.find((activity) => activity.activityType === 'pullMoveOnNode');
  const copied = pull?.progress as MoveProgressView['copied'];
  return {
    status: description.status.name,
    phase: description.typedSearchAttributes.get(PhaseKey) ?? null,
    nodeId: description.typedSearchAttributes.get(NodeIdKey) ?? null,
    ...(copied && typeof copied === 'object' ? { copied } : {}),
    pending: pending.map(
      (activity) =>
        `${activity.activityType} ${activity.state}, attempt ${activity.attempt}` +
        (activity.lastFailure ? `, last failure: ${activity.lastFailure}` : ''),
    ),
  };
}

/** The move's end: its result, or the DriverError of its failure (the rolled-back move's type and message). */
export async function moveResult<Result = MoveVolumeResult>(handle: WorkflowHandle): Promise<Result> {
  try {
    return (await handle.result()) as Result;
  } catch (error) {
    if (!(error instanceof WorkflowFailedError)) throw error;
    const cause = error.cause as { type?: string; message?: string } | undefined;
    const type = isFailureType(cause?.type) ? cause.type : FailureType.Internal;
    throw new DriverError(type, cause?.message ?? error.message);
  }
}

/* `durable-csi nodes evacuate` (docs/operations.md, "Evacuate a node"). */

/** A volume to move off the node, and the nodes its StorageClass admits (undefined: any). */
export interface EvacuationVolume {
  volumeId: string;
  claim?: string;
  capacityBytes: number;
  allowedNodes?: string[];
}

/** A node a volume may move to, with the room its agent last reported. */
export interface EvacuationTarget {
  nodeId: string;
  availableBytes: number;
}

/** A snapshot to move off the node: one a VolumeSnapshot is bound to (kubernetes/snapshot-contents.ts). */
export interface EvacuationSnapshot {
  snapshotId: string;
  volumeSnapshot: string;
  sizeBytes: number;
  groupSnapshotHandle?: string;
}

export type EvacuationStep =
  | { volumeId: string; claim?: string; capacityBytes: number; targetNodeId: string }
  | { volumeId: string; claim?: string; capacityBytes: number; refused: string }
  | SnapshotEvacuationStep;

export type SnapshotEvacuationStep =
  | { snapshotId: string; volumeSnapshot: string; sizeBytes: number; targetNodeId: string }
  | { snapshotId: string; volumeSnapshot: string; sizeBytes: number; refused: string };

/**
 * Each volume to the admitted target with the most room left, the largest volumes first (so that the large ones
 * still find a node); a volume no target admits or has room for is refused, saying which. Then each snapshot, the
 * same way, to the room the volumes left (a snapshot is restored on its own node, so any target serves; a member of a
 * group snapshot is refused: a group moves whole or not at all). Room is what the agents reported, less what this
 * plan already gave them: a move checks again before it copies (and rolls back without room).
 */
export function planEvacuation(
  volumes: EvacuationVolume[],
  targets: EvacuationTarget[],
  snapshots: EvacuationSnapshot[] = [],
): EvacuationStep[] {
  const room = new Map(targets.map((target) => [target.nodeId, target.availableBytes]));
  const ordered = [...volumes].sort(
    (a, b) => b.capacityBytes - a.capacityBytes || a.volumeId.localeCompare(b.volumeId),
  );
  const volumeSteps = ordered.map((volume): EvacuationStep => {
    const { volumeId, capacityBytes } = volume;
    const claim = volume.claim === undefined ? {} : { claim: volume.claim };
    const admitted = [...room.keys()].filter((nodeId) => !volume.allowedNodes || volume.allowedNodes.includes(nodeId));
    if (admitted.length === 0) {
      const why = volume.allowedNodes
        ? `its StorageClass admits only ${volume.allowedNodes.join(', ') || 'no node'}, and none of them can take it`
        : 'no live node serves node-to-node copies on a loop pool';
      return { volumeId, ...claim, capacityBytes, refused: why };
    }
    const best = admitted.sort((a, b) => room.get(b)! - room.get(a)! || a.localeCompare(b))[0]!;
    if (room.get(best)! < capacityBytes) {
      return {
        volumeId,
        ...claim,
        capacityBytes,
        refused: `no node has room for it (the most: ${best}, ${formatBytes(Math.max(0, room.get(best)!))} available)`,
      };
    }
    room.set(best, room.get(best)! - capacityBytes);
    return { volumeId, ...claim, capacityBytes, targetNodeId: best };
  });
  const snapshotSteps = [...snapshots]
    .sort((a, b) => b.sizeBytes - a.sizeBytes || a.snapshotId.localeCompare(b.snapshotId))
    .map((snapshot): SnapshotEvacuationStep => {
      const { snapshotId, volumeSnapshot, sizeBytes } = snapshot;
      if (snapshot.groupSnapshotHandle)
        return {
          snapshotId,
          volumeSnapshot,
          sizeBytes,
          refused: `a member of group snapshot ${snapshot.groupSnapshotHandle}: a group moves whole or not at all`,
        };
      const best = [...room.keys()].sort((a, b) => room.get(b)! - room.get(a)! || a.localeCompare(b))[0];
      if (best === undefined)
        return { snapshotId, volumeSnapshot, sizeBytes, refused: 'no live node of its backend serves copies' };
      if (room.get(best)! < sizeBytes)
        return {
          snapshotId,
          volumeSnapshot,
          sizeBytes,
          refused: `no node has room for it (the most: ${best}, ${formatBytes(Math.max(0, room.get(best)!))} available)`,
        };
      room.set(best, room.get(best)! - sizeBytes);
      return { snapshotId, volumeSnapshot, sizeBytes, targetNodeId: best };
    });
  return [...volumeSteps, ...snapshotSteps];
}

/**
 * The nodes that can take moved volumes now: live, a pool of the source's backend (a loop source's when the source
 * has no record), serving copies, not the source, not cordoned (as Kubernetes says), and among `only` when the
 * operator names them.
 */
export function evacuationTargets(
  nodes: NodeView[],
  source: string,
  options: { unschedulable?: string[]; only?: string[] } = {},
): EvacuationTarget[] {
  const backend = nodes.find((node) => node.nodeId === source)?.backend ?? 'loop';
  return nodes
    .filter(
      (node) =>
        node.nodeId !== source &&
        node.live &&
        node.backend === backend &&
        node.transfer !== undefined &&
        !options.unschedulable?.includes(node.nodeId) &&
        (!options.only || options.only.includes(node.nodeId)),
    )
    .map((node) => ({ nodeId: node.nodeId, availableBytes: node.availableBytes }));
}

export interface EvacuationResult {
  /** The moved volume's ID, or the moved snapshot's. */
  volumeId: string;
  targetNodeId: string;
  /** The new volume's ID, or the new snapshot's. */
  newVolumeId?: string;
  /** Why the move failed (it rolled back), as `Type: message`. */
  error?: string;
}

/** The planned moves, `parallel` at a time, each started (or attached to) and awaited; `say` gets a line per event. */
export async function runEvacuation(
  client: Client,
  driverName: string,
  plan: EvacuationStep[],
  parallel: number,
  say: (line: string) => void,
): Promise<EvacuationResult[]> {
  const queue = plan.flatMap((step) => ('targetNodeId' in step ? [step] : []));
  const results: EvacuationResult[] = [];
  const worker = async () => {
    for (let step = queue.shift(); step; step = queue.shift()) {
      const { targetNodeId } = step;
      const volumeId = 'snapshotId' in step ? step.snapshotId : step.volumeId;
      try {
        const start =
          'snapshotId' in step
            ? await startSnapshotMove(client, driverName, { snapshotId: volumeId, targetNodeId })
            : await startMove(client, driverName, { volumeId, targetNodeId });
        say(`${start.attached ? 'attached to' : 'started'} ${start.workflowId} (to ${targetNodeId})`);
        const result = await moveResult<{ outcome: string; newVolumeId?: string; newSnapshotId?: string }>(
          client.workflow.getHandle(start.workflowId),
        );
        const newId = result.newSnapshotId ?? result.newVolumeId ?? '';
        say(`${volumeId}: ${result.outcome} to ${newId}`);
        results.push({ volumeId, targetNodeId, newVolumeId: newId });
      } catch (error) {
        const text = error instanceof DriverError ? `${error.type}: ${error.message}` : String(error);
        say(`${volumeId}: failed: ${text}`);
        results.push({ volumeId, targetNodeId, error: text });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, queue.length) }, worker));
  return results;
}

/**
 * `volumes move --cancel`: the volume's running move is asked to stop and awaited. Before its claim is switched it
 * rolls back (answered with what it says); after, it completes, and the cancellation is refused (FailedPrecondition).
 * A terminated move (which ran no code to clean up) is rolled back by a new run of it: rollBackAbandoned.
 */
export async function cancelMove(client: Client, driverName: string, volumeId: string): Promise<string> {
  const workflowId = moveWorkflowId(driverName, volumeId);
  const handle = client.workflow.getHandle(workflowId);
  let status: string;
  let type: string;
  try {
    const description = await handle.describe();
    status = description.status.name;
    type = description.type;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError)
      throw new DriverError(FailureType.NotFound, `${volumeId} has no move (${workflowId})`);
    throw error;
  }
  const snapshot = type === 'moveSnapshot';
  if (status === 'TERMINATED' || status === 'TIMED_OUT')
    return snapshot ? rollBackAbandonedSnapshot(client, handle, volumeId) : rollBackAbandoned(client, handle, volumeId);
  if (status !== 'RUNNING')
    throw new DriverError(FailureType.FailedPrecondition, `the move of ${volumeId} is not running: it ended ${status}`);
  await handle.cancel();
  try {
    const result = await moveResult<{ outcome: string; targetNodeId: string } & Record<string, unknown>>(handle);
    throw new DriverError(
      FailureType.FailedPrecondition,
      `the move of ${volumeId} had switched its ${snapshot ? 'VolumeSnapshot' : 'claim'} when the cancellation ` +
        `came: it ${result.outcome} to ${String(result.newSnapshotId ?? result.newVolumeId)} on ${result.targetNodeId}`,
    );
  } catch (error) {
    if (error instanceof DriverError && error.type === FailureType.Aborted) return `cancelled: ${error.message}`;
    throw error;
  }
}

/**
 * What a move's (terminated) run had reached, from its history: its input, the pool its pull completed in, the input
 * of its claim's switch if it began one, and whether that switch completed (the claim bound to the copy).
 */
export function abandonedMove<Input = MoveVolumeInput, Switching = SwitchInput>(
  history: temporal.api.history.v1.IHistory,
  workflowId: string,
): { input: Input; abandoned: { adoptedOn?: string; switching?: Switching }; switched: boolean } {
  const events = history.events ?? [];
  const first = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  if (!first) throw new DriverError(FailureType.Internal, `the history of ${workflowId} has no input`);
  const input = defaultPayloadConverter.fromPayload<Input>(first);
  const scheduled = new Map<string, string>();
  const abandoned: { adoptedOn?: string; switching?: Switching } = {};
  let switched = false;
  for (const event of events) {
    const asked = event.activityTaskScheduledEventAttributes;
    if (asked) {
      const type = asked.activityType?.name ?? '';
      scheduled.set(String(event.eventId), type);
      const payload = asked.input?.payloads?.[0];
      // A volume's switch, or a snapshot's.
      if ((type === 'prepareMovedSwitch' || type === 'prepareSnapshotSwitch') && payload) {
        abandoned.switching = defaultPayloadConverter.fromPayload<Switching>(payload);
      }
    }
    const done = event.activityTaskCompletedEventAttributes;
    const type = done ? scheduled.get(String(done.scheduledEventId)) : undefined;
    const result = done?.result?.payloads?.[0];
    // The pool the copy was pulled into is the one the adopt may have made the new volume in.
    if (type === 'pullMoveOnNode' && result) {
      abandoned.adoptedOn = defaultPayloadConverter.fromPayload<NodePullResult>(result).poolId;
    }
    if (type === 'switchMovedClaim' || type === 'switchMovedSnapshot') switched = true;
  }
  return { input, abandoned, switched };
}

/**
 * A terminated (or timed out) move left what it had made where it stood: the hold on the volume, the snapshot and
 * offer on the source, the copy staged on the target, maybe the new PV. Its history says what it had asked for; a new
 * run of the move under the same workflow ID and keys (`rollBackOnly`) undoes that as a failed move's rollback does,
 * each step waiting for its node. A move terminated once its claim was switched to the copy is not rolled back.
 */
async function rollBackAbandoned(client: Client, terminated: WorkflowHandle, volumeId: string): Promise<string> {
  const { input, abandoned, switched } = abandonedMove(await terminated.fetchHistory(), terminated.workflowId);
  if (switched) {
    const { switching } = abandoned;
    throw new DriverError(
      FailureType.FailedPrecondition,
      `the move of ${volumeId} was terminated after its claim ${switching?.moved.claim.namespace}/` +
        `${switching?.moved.claim.name} was bound to the copy (PV ${switching?.newPvName}, volume ` +
        `${switching?.newVolumeId}): it is not rolled back. What it had still to do: delete PV ` +
        `${switching?.moved.pv.name} (held with reclaim policy Retain) and ${volumeId} (docs/operations.md, ` +
        '"A move terminated after its switch")',
    );
  }
  // A terminated rollback's own run is rolled back with what its input already named.
  const rollBack = { ...input, rollBackOnly: { ...input.rollBackOnly, ...abandoned } };
  return runRollBack(client, terminated.workflowId, {
    type: 'moveVolume',
    input: rollBack,
    operation: 'move',
    id: volumeId,
  });
}

/**
 * A snapshot's move terminated: as a volume's (rollBackAbandoned), with the snapshot's switch. Not rolled back once
 * its VolumeSnapshot was bound to the copy.
 */
async function rollBackAbandonedSnapshot(
  client: Client,
  terminated: WorkflowHandle,
  snapshotId: string,
): Promise<string> {
  const { input, abandoned, switched } = abandonedMove<MoveSnapshotInput, SnapshotSwitchInput>(
    await terminated.fetchHistory(),
    terminated.workflowId,
  );
  if (switched) {
    const moved = abandoned.switching?.moved;
    throw new DriverError(
      FailureType.FailedPrecondition,
      `the move of ${snapshotId} was terminated after its VolumeSnapshot ${moved?.snapshot.namespace}/` +
        `${moved?.snapshot.name} was bound to the copy (VolumeSnapshotContent ${abandoned.switching?.newContentName}, ` +
        `snapshot ${abandoned.switching?.newSnapshotId}): it is not rolled back. What it had still to do: delete ` +
        `VolumeSnapshotContent ${moved?.content.name} (held with deletion policy Retain) and snapshot ${snapshotId} ` +
        `(durable-csi snapshots delete ${snapshotId})`,
    );
  }
  const rollBack = { ...input, rollBackOnly: { ...input.rollBackOnly, ...abandoned } };
  return runRollBack(client, terminated.workflowId, {
    type: 'moveSnapshot',
    input: rollBack,
    operation: 'snapshot-move',
    id: snapshotId,
  });
}

/** The run of a terminated move that only rolls it back, started (or attached to), and its end as `--cancel` says it. */
async function runRollBack(
  client: Client,
  workflowId: string,
  run: {
    type: 'moveVolume' | 'moveSnapshot';
    input: MoveVolumeInput | MoveSnapshotInput;
    operation: string;
    id: string;
  },
): Promise<string> {
  const { input, id } = run;
  const memo: MoveMemo = { targetNodeId: input.targetNodeId, moveKey: input.moveKey };
  try {
    await client.workflow.start(run.type, {
      workflowId,
      taskQueue: controlTaskQueue(input.driverName),
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      memo: { [MOVE_MEMO_KEY]: memo },
      staticSummary: `roll back terminated move of ${id} to ${input.targetNodeId}`,
      typedSearchAttributes: [
        { key: OperationKey, value: run.operation },
        { key: VolumeIdKey, value: id },
        // What the terminated run made is this run's to remove: not an orphan while it runs.
        { key: VolumeNameKey, value: `move-${input.moveKey}` },
        { key: NodeIdKey, value: input.targetNodeId },
        { key: PhaseKey, value: 'rolling-back' },
      ],
    });
  } catch (error) {
    // Another --cancel started it first: this one waits for the same rollback.
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
  try {
    const result = await moveResult<{ outcome: string; targetNodeId: string } & Record<string, unknown>>(
      client.workflow.getHandle(workflowId),
    );
    throw new DriverError(
      FailureType.FailedPrecondition,
      `the move of ${id} ran again and ${result.outcome} to ${String(result.newSnapshotId ?? result.newVolumeId)} ` +
        `on ${result.targetNodeId}`,
    );
  } catch (error) {
    if (error instanceof DriverError && error.type === FailureType.Aborted) return `cancelled: ${error.message}`;
    throw error;
  }
}
