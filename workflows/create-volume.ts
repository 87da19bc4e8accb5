import {
  ActivityFailure,
  ApplicationFailure,
  TimeoutFailure,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  upsertSearchAttributes,
  uuid4,
} from '@temporalio/workflow';
import { TimeoutType } from '@temporalio/common';
import type { CandidateAnswer, ControlActivities, ForgottenOn } from '../activities/control-activities';
import type { NodeActivities, NodeCreateResult } from '../activities/node-activities';
import { FailureType, NON_RETRYABLE_TYPES } from '../common/failures';
import { formatVolumeId, parseVolumeId, poolIdPrefix, parseSnapshotId } from '../common/ids';
import { requestShape, type CreateRequestShape } from '../common/create-request';
import { createCompletionOptions, createFirstTryOptions } from './node-activity-options';
import { listenForForget } from './node-forgotten';
import { followNodeLiveness } from './node-liveness';
import { rankCandidates } from './placement';
import { NodeIdKey, PhaseKey, VolumeIdKey } from '../common/names';
import type { NodeView, WrittenOffVolume } from '../common/names';

/** Everything the create needs; secrets never enter here (invariant 6). */
export interface CreateVolumeInput {
  driverName: string;
  name: string;
  capacityBytes: number;
  parameters: Record<string, string>;
  accessType: 'mount' | 'block';
  fsType?: string;
  requisite?: string[];
  preferred: string[];
  /**
   * Restore (a snapshot ID) or clone (a volume ID): the controller has restricted `requisite` to the source's node,
   * the only one holding the data.
   */
  contentSource?: { snapshotId: string } | { volumeId: string };
  /** With a content source: the CO's limit (0: none), so the node may raise the capacity to the source's size. */
  limitBytes?: number;
}

export interface CreateVolumeResult {
  volumeId: string;
  nodeId: string;
  capacityBytes: number;
  /** What was asked (as in the start memo): lets a caller judge its own request without describing the run. */
  request?: CreateRequestShape;
}

const control = proxyActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { maximumInterval: '10s' },
});
/**
 * Placement reads a few node records: a local activity in the controller's workflow worker, so it costs no
 * activity task and no extra workflow task. It only reads, so running it again after a crash is harmless.
 */
const placement = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { maximumInterval: '10s' },
});

function firstTry(driverName: string, nodeId: string, copying: boolean) {
  return proxyActivities<NodeActivities>(createFirstTryOptions(driverName, nodeId, copying));
}

function completion(driverName: string, nodeId: string, copying: boolean) {
  return proxyActivities<NodeActivities>(createCompletionOptions(driverName, nodeId, copying));
}

export async function createVolume(input: CreateVolumeInput): Promise<CreateVolumeResult> {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  // A copy has one possible node, and its record's free space lags deletions by a heartbeat: its pool decides.
  const askPoolWhenFull = input.contentSource !== undefined;
  const request = { ...candidateRequest(input), askPoolWhenFull };
  const found = await placement.findCandidates(request);
  const candidates = rankCandidates(found.candidates, request, Math.random); // seeded per workflow: replays identically
  const key = uuid4().replace(/-/g, '');
  const nodeInput = {
    key,
    name: input.name,
    capacityBytes: input.capacityBytes,
    parameters: input.parameters,
    accessType: input.accessType,
    fsType: input.fsType,
    ...nodeContentSource(input),
  };
  const copying = input.contentSource !== undefined;

  let timedOut = 0;
  /** Candidates whose completion a forget of that node ended: tried, but not "without room". */
  const endedByForget: ForgottenOn[] = [];
  for (const node of candidates) {
    upsertSearchAttributes([
      { key: NodeIdKey, value: node.nodeId },
      { key: PhaseKey, value: 'running' },
    ]);
    setCurrentDetails(`allocating on node ${node.nodeId}`);
    let created: NodeCreateResult;
    try {
      created = await firstTry(input.driverName, node.nodeId, copying).createVolumeOnNode(nodeInput);
    } catch (error) {
      if (neverStarted(error)) timedOut++;
      if (neverStarted(error) || refused(error, FailureType.ResourceExhausted)) continue;
      if (isNonRetryable(error)) throw error;
      setCurrentDetails(`node ${node.nodeId} may have allocated; finishing there before anything else`);
      // The phase is already "running" for this node: from here it follows the node's record.
      liveness.waitOn({ nodeId: node.nodeId, doing: 'finishing the allocation' }, true, new Date(), true);
      try {
        const finished = await untilForgotten(node.nodeId, () =>
          completion(input.driverName, node.nodeId, copying).createVolumeOnNode(nodeInput),
        );
        liveness.stop();
        if (finished.forgotten) {
          // Another node may now be tried. The forgotten one may have allocated before it went, and it may come
          // back with the same pool (the soak's forget-then-return): its record keeps the key, as for a deletion
          // written off, and deletes it there on return ("absent" if nothing was allocated).
          await writeOffAllocation(input, node, key, finished.notice.reason);
          endedByForget.push({ nodeId: node.nodeId, reason: finished.notice.reason });
          continue;
        }
        created = finished.value;
      } catch (completionError) {
        liveness.stop();
        // The node answered definitively and its journal guarantees nothing was left behind.
        if (refused(completionError, FailureType.ResourceExhausted)) continue;
        throw completionError;
      }
    }
    // The ID names the node that reported the allocation, not the workflow's choice: workflow code may choose
    // differently on replay after an upgrade; the activity's result is what really happened.
    const home = created.nodeId ?? node.nodeId;
    const volumeId = formatVolumeId({ nodeId: home, poolIdPrefix: poolIdPrefix(created.poolId), key: created.key });
    upsertSearchAttributes([
      { key: VolumeIdKey, value: volumeId },
      { key: PhaseKey, value: 'done' },
    ]);
    setCurrentDetails(`done: ${volumeId}`);
    return { volumeId, nodeId: home, capacityBytes: created.capacityBytes, request: requestShape(input) };
  }

  upsertSearchAttributes([{ key: PhaseKey, value: 'failed' }]);
  const failure = whyNotPlaced(input, found, candidates.length, timedOut, endedByForget);
  setCurrentDetails(`failed: ${failure.message}`);
  throw ApplicationFailure.create({ ...failure, nonRetryable: true });
}

/**
 * The key this create may have allocated on a node now forgotten, kept by that node's record for its return. The
 * pool that may hold it is the one the node had when the attempt ran, not necessarily the one placement read (the
 * pool may have been replaced in between): the record deletes it on whatever pool the node returns with (`anyPool`).
 */
async function writeOffAllocation(input: CreateVolumeInput, node: NodeView, key: string, reason: string) {
  const prefix = poolIdPrefix(node.poolId);
  const volume: WrittenOffVolume = {
    volumeId: formatVolumeId({ nodeId: node.nodeId, poolIdPrefix: prefix, key }),
    key,
    poolIdPrefix: prefix,
    reason,
    anyPool: true,
  };
  await control.recordWriteOff({ driverName: input.driverName, nodeId: node.nodeId, volume });
}

/** The source as the node takes it (key and pool prefix); the controller checked the ID is well formed. */
function nodeContentSource(input: CreateVolumeInput) {
  const source = input.contentSource;
  if (!source) return {};
  const parts = 'snapshotId' in source ? parseSnapshotId(source.snapshotId) : parseVolumeId(source.volumeId);
  if (!parts) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidArgument,
      message: `volume_content_source ${JSON.stringify(source)} was not issued by this driver`,
      nonRetryable: true,
    });
  }
  const key = 'snapshotId' in source ? { snapshotKey: parts.key } : { volumeKey: parts.key };
  return { contentSource: { ...key, poolIdPrefix: parts.poolIdPrefix }, limitBytes: input.limitBytes ?? 0 };
}

function candidateRequest(input: CreateVolumeInput) {
  const { capacityBytes, accessType, requisite, preferred } = input;
  return { capacityBytes, accessType, requisite, preferred };
}

/**
 * Why nothing was placed. RESOURCE_EXHAUSTED (the CO reschedules the pod) only when nodes themselves said they have
 * no room, or when a node the CO chose (requisite) cannot serve block: external-provisioner then drops the selected
 * node so the scheduler chooses again (INVALID_ARGUMENT would leave the PVC pending for ever). "Cannot tell right
 * now" (offline or unknown nodes, nodes that did not pick the work up, nothing seen yet: visibility, which a create
 * without topology samples, lags the records by seconds) is UNAVAILABLE, which the CO retries. A restore's or clone's
 * source on a forgotten node is NOT_FOUND; other forgotten nodes are named and, like nodes without room, let the CO
 * choose another node (nothing will answer there again). `endedByForget`: candidates tried whose completion a forget
 * ended, counted as forgotten, not as without room.
 */
function whyNotPlaced(
  input: CreateVolumeInput,
  found: CandidateAnswer,
  tried: number,
  timedOut: number,
  endedByForget: ForgottenOn[],
) {
  const forgotten = [...(found.forgotten ?? []), ...endedByForget];
  const where = input.requisite ? `on nodes ${input.requisite.join(', ')}` : 'on any live node';
  const what = `cannot place ${input.capacityBytes} bytes ${where}`;
  const sourceGone = copySourceGone(input, forgotten);
  if (sourceGone) return { type: FailureType.NotFound, message: `${what}: ${sourceGone}` };
  const full = found.full + tried - timedOut - endedByForget.length;
  const notAnswering = found.offline + timedOut;
  const seen = [
    full > 0 ? `${full} without room` : '',
    notAnswering > 0 ? `${notAnswering} offline or not answering` : '',
    found.unknown.length > 0 ? `no record of ${found.unknown.join(', ')} (no agent registered it)` : '',
    found.incapable > 0 ? `${found.incapable} cannot serve block (block volumes need the loop backend)` : '',
    forgotten.length > 0 ? `${forgotten.map(forgottenFor).join(', ')} forgotten for good` : '',
  ].filter(Boolean);
  if (seen.length === 0) {
    const listed = found.listed ?? 0;
    const detail = input.requisite
      ? 'no candidate answered'
      : listed === 0
        ? 'visibility lists no node record of this driver yet (it lags the records by seconds)'
        : `visibility lists ${listed} node records, none live and reported yet (it lags the records by seconds)`;
    return { type: FailureType.Unavailable, message: `${what} right now: ${detail}; retry` };
  }
  const detail = seen.join('; ');
  if (notAnswering + found.unknown.length > 0)
    return { type: FailureType.Unavailable, message: `${what} right now: ${detail}; retry` };
  // Without topology there is no other node to reschedule to: block on a cluster of dir nodes is bad input.
  if (found.incapable > 0 && full === 0 && !input.requisite)
    return { type: FailureType.InvalidArgument, message: `${what}: ${detail}` };
  const elsewhere = found.incapable > 0 ? '; another node may serve it' : '';
  return { type: FailureType.ResourceExhausted, message: `${what}: ${detail}${elsewhere}` };
}

/**
 * A restore's or clone's source is on one node: once that node is forgotten the source is gone with it, which is
 * NOT_FOUND (CSI: the content source does not exist), not a reason to wait or to reschedule. Undefined otherwise.
 */
function copySourceGone(input: CreateVolumeInput, forgotten: ForgottenOn[]): string | undefined {
  const source = input.contentSource;
  if (!source) return undefined;
  const [kind, id] = 'snapshotId' in source ? ['snapshot', source.snapshotId] : ['source volume', source.volumeId];
  const home = ('snapshotId' in source ? parseSnapshotId(id) : parseVolumeId(id))?.nodeId;
  const decision = forgotten.find((node) => node.nodeId === home);
  if (!decision) return undefined;
  return `${kind} ${id} is on node ${decision.nodeId}, which was forgotten for good (${decision.reason}): the ${kind} is gone with it`;
}

function forgottenFor(node: ForgottenOn): string {
  return `node ${node.nodeId} (${node.reason})`;
}

function neverStarted(error: unknown): boolean {
  return (
    error instanceof ActivityFailure &&
    error.cause instanceof TimeoutFailure &&
    error.cause.timeoutType === TimeoutType.SCHEDULE_TO_START
  );
}

function refused(error: unknown, type: FailureType): boolean {
  return error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.type === type;
}

function isNonRetryable(error: unknown): boolean {
  return (
    error instanceof ActivityFailure &&
    error.cause instanceof ApplicationFailure &&
    (error.cause.nonRetryable || NON_RETRYABLE_TYPES.includes(error.cause.type as FailureType))
  );
}
