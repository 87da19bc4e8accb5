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
import type { NodeActivities, NodeCreateInput, NodeCreateResult } from '../activities/node-activities';
import type { CandidateAnswer, ForgottenOn, PlacementActivities } from '../activities/placement';
import { FailureType, NON_RETRYABLE_TYPES } from '../common/failures';
import {
  NodeIdKey,
  PhaseKey,
  VolumeIdKey,
  type NodeView,
  formatVolumeId,
  parseSnapshotId,
  parseVolumeId,
  poolIdPrefix,
} from '../common/names';
import {
  createCompletionOptions,
  createFirstTryOptions,
  followNodeLiveness,
  listenForForget,
  recordWriteOff,
  type LivenessFollower,
  type UntilForgotten,
} from './node-work';

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

/**
 * The parts of a CreateVolume request that decide whether a later request for the same name is compatible (CSI:
 * same name, different size or parameters is ALREADY_EXISTS). Kept in the create's start memo and in its result.
 */
export interface CreateRequestShape {
  capacityBytes: number;
  parameters: Record<string, string>;
  accessType?: string;
  fsType?: string;
  /** Restore or clone: the source's ID. Absent for an empty volume (and in memos of earlier releases). */
  contentSource?: { snapshotId: string } | { volumeId: string };
}

export function requestShape(input: CreateRequestShape): CreateRequestShape {
  const { capacityBytes, parameters, accessType, fsType, contentSource } = input;
  return { capacityBytes, parameters, accessType, fsType, ...(contentSource ? { contentSource } : {}) };
}

export interface CreateVolumeResult {
  volumeId: string;
  nodeId: string;
  capacityBytes: number;
  /** What was asked (as in the start memo): lets a caller judge its own request without describing the run. */
  request: CreateRequestShape;
}

/** Placement (activities/placement.ts): a local activity in the controller's workflow worker, which only reads. */
const placement = proxyLocalActivities<PlacementActivities>({
  startToCloseTimeout: '30s',
  retry: { maximumInterval: '10s' },
});

/**
 * Places the volume and allocates it on the first candidate that takes it. A candidate is left for the next only
 * when its first try provably never ran (invariant 4) or its pool refused for lack of room; one that may have
 * allocated is finished there first, and only its forget ends that.
 */
export async function createVolume(input: CreateVolumeInput): Promise<CreateVolumeResult> {
  const run = new CreateRun(input, listenForForget(), followNodeLiveness());
  const found = await placement.findCandidates(candidateRequest(input));
  for (const node of found.candidates) {
    const created = await run.allocateOn(node);
    if (created) return run.done(node, created);
  }
  return run.failed(found);
}

/** One create run: what it asks every node, and what its tries found so far. */
class CreateRun {
  private readonly nodeInput: NodeCreateInput;
  private readonly copying: boolean;
  /** Candidates whose first try timed out waiting to start: the node never had the work. */
  private timedOut = 0;
  /** Candidates whose completion a forget of that node ended: tried, but not "without room". */
  private readonly endedByForget: ForgottenOn[] = [];

  constructor(
    private readonly input: CreateVolumeInput,
    private readonly untilForgotten: <T>(nodeId: string, work: () => Promise<T>) => Promise<UntilForgotten<T>>,
    private readonly liveness: LivenessFollower,
  ) {
    this.nodeInput = nodeCreateInput(input, uuid4().replace(/-/g, ''));
    this.copying = input.contentSource !== undefined;
  }

  /** The candidate's allocation, or undefined when the next candidate is to be tried. */
  async allocateOn(node: NodeView): Promise<NodeCreateResult | undefined> {
    upsertSearchAttributes([
      { key: NodeIdKey, value: node.nodeId },
      { key: PhaseKey, value: 'running' },
    ]);
    setCurrentDetails(`allocating on node ${node.nodeId}`);
    const { driverName } = this.input;
    try {
      const onNode = proxyActivities<NodeActivities>(createFirstTryOptions(driverName, node.nodeId, this.copying));
      return await onNode.createVolumeOnNode(this.nodeInput);
    } catch (error) {
      if (neverStarted(error)) this.timedOut++;
      if (neverStarted(error) || refused(error, FailureType.ResourceExhausted)) return undefined;
      if (isNonRetryable(error)) throw error;
    }
    return this.completeOn(node);
  }

  /** The first try may have allocated: the node finishes what it started, unless it is forgotten meanwhile. */
  private async completeOn(node: NodeView): Promise<NodeCreateResult | undefined> {
    setCurrentDetails(`node ${node.nodeId} may have allocated; finishing there before anything else`);
    // The phase is already "running" for this node: from here it follows the node's record.
    this.liveness.waitOn({ nodeId: node.nodeId, doing: 'finishing the allocation' }, true, new Date(), true);
    const onNode = proxyActivities<NodeActivities>(
      createCompletionOptions(this.input.driverName, node.nodeId, this.copying),
    );
    try {
      const finished = await this.untilForgotten(node.nodeId, () => onNode.createVolumeOnNode(this.nodeInput));
      this.liveness.stop();
      if (!finished.forgotten) return finished.value;
      // Another node may now be tried. The forgotten one may have allocated before it went, and it may come back
      // with the same pool (the soak's forget-then-return): its record keeps the key, as for a deletion written
      // off, and deletes it there on return ("absent" if nothing was allocated).
      await this.writeOffAllocation(node, finished.notice.reason);
      this.endedByForget.push({ nodeId: node.nodeId, reason: finished.notice.reason });
      return undefined;
    } catch (completionError) {
      this.liveness.stop();
      // The node answered definitively and its journal guarantees nothing was left behind.
      if (refused(completionError, FailureType.ResourceExhausted)) return undefined;
      throw completionError;
    }
  }

  /**
   * The ID names the node that reported the allocation, not the workflow's choice: workflow code may choose
   * differently on replay after an upgrade; the activity's result is what really happened.
   */
  done(node: NodeView, created: NodeCreateResult): CreateVolumeResult {
    const home = created.nodeId ?? node.nodeId;
    const volumeId = formatVolumeId({ nodeId: home, poolIdPrefix: poolIdPrefix(created.poolId), key: created.key });
    upsertSearchAttributes([
      { key: VolumeIdKey, value: volumeId },
      { key: PhaseKey, value: 'done' },
    ]);
    setCurrentDetails(`done: ${volumeId}`);
    return { volumeId, nodeId: home, capacityBytes: created.capacityBytes, request: requestShape(this.input) };
  }

  failed(found: CandidateAnswer): never {
    upsertSearchAttributes([{ key: PhaseKey, value: 'failed' }]);
    const failure = whyNotPlaced(this.input, found, found.candidates.length, this.timedOut, this.endedByForget);
    setCurrentDetails(`failed: ${failure.message}`);
    throw ApplicationFailure.create({ ...failure, nonRetryable: true });
  }

  /**
   * The key this create may have allocated on a node now forgotten, kept by that node's record for its return. The
   * pool that may hold it is the one the node had when the attempt ran, not necessarily the one placement read (the
   * pool may have been replaced in between): the record deletes it on whatever pool the node returns with
   * (`anyPool`).
   */
  private async writeOffAllocation(node: NodeView, reason: string): Promise<void> {
    const { key } = this.nodeInput;
    const prefix = poolIdPrefix(node.poolId);
    const volumeId = formatVolumeId({ nodeId: node.nodeId, poolIdPrefix: prefix, key });
    await recordWriteOff(this.input.driverName, node.nodeId, {
      volumeId,
      key,
      poolIdPrefix: prefix,
      reason,
      anyPool: true,
    });
  }
}

/** What every node is asked: the same key on every try, so a retry finds the earlier allocation. */
function nodeCreateInput(input: CreateVolumeInput, key: string): NodeCreateInput {
  const { name, capacityBytes, parameters, accessType, fsType } = input;
  return { key, name, capacityBytes, parameters, accessType, fsType, ...nodeContentSource(input) };
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

/** A copy has one possible node, and its record's free space lags deletions by a heartbeat: its pool decides. */
function candidateRequest(input: CreateVolumeInput) {
  const { capacityBytes, accessType, requisite, preferred } = input;
  return { capacityBytes, accessType, requisite, preferred, askPoolWhenFull: input.contentSource !== undefined };
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
