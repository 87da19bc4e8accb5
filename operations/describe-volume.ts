import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { readNodeRecord } from '../node-records/reads';
import { DriverError, FailureType } from '../common/failures';
import { PvcNameKey, PvcNamespaceKey, VolumeIdKey, parseSnapshotId, parseVolumeId } from '../common/names';
import type { TimelineEvent } from './operation-timeline';
import { buildTimeline, failureText } from './operation-timeline';
import type { OperationSummary } from './pending-operations';
import { driverOperationsClause, listOperations, summarize } from './pending-operations';

type RawPendingActivity = NonNullable<WorkflowExecutionDescription['raw']['pendingActivities']>[number];

export interface PendingActivity {
  activityType: string;
  /** scheduled (waiting in its queue), started, cancel-requested, paused. */
  state: string;
  attempt: number;
  lastFailure: string | null;
  lastStartedTime: Date | null;
  /** What its last heartbeat carried (a move's pull: bytes copied), decoded; null when none or unreadable. */
  progress: unknown;
}

export interface OperationHistory extends OperationSummary {
  summary: string | null;
  /** The decoded completion result (e.g. a deletion's outcome); null unless completed. */
  result: unknown;
  pendingActivities: PendingActivity[];
  timeline: TimelineEvent[];
}

export interface VolumeDescription {
  volumeId: string;
  nodeId: string;
  /** The home node as its record knows it now. */
  node: { state: 'live' | 'offline' | 'forgotten' | 'unknown'; lastHeartbeat: Date | null; reason: string | null };
  operations: OperationHistory[];
}

export interface ClaimDescription {
  pvc: { namespace: string; name: string };
  /** Every volume made for the claim (a claim deleted and made again under the same name has several). */
  volumes: VolumeDescription[];
  /** Creates for the claim that have no volume (yet): still placing, or failed. */
  unplaced: OperationHistory[];
}

const PENDING_STATES = ['unspecified', 'scheduled', 'started', 'cancel-requested', 'paused', 'pause-requested'];

/**
 * Every operation recorded for a volume (its create, deletions, expansions, each run) with its timeline. Found
 * through the DurableCsiVolumeId search attribute, which the create sets once it has placed the volume.
 */
export async function describeVolume(client: Client, driverName: string, volumeId: string): Promise<VolumeDescription> {
  // A snapshot's ID too: its deletions and moves carry it in the same attribute.
  const parts = parseVolumeId(volumeId) ?? parseSnapshotId(volumeId);
  if (!parts) throw new DriverError(FailureType.NotFound, `"${volumeId}" is not a volume ID this driver issued`);
  // Both parsers admit only [a-z0-9._-], so the ID is safe inside the quoted query string.
  const query = `${driverOperationsClause(driverName)} AND ${VolumeIdKey.name} = "${volumeId}"`;
  const [found, record] = await Promise.all([
    listOperations(client, query),
    readNodeRecord(client, driverName, parts.nodeId),
  ]);
  const operations = await Promise.all(found.map((operation) => operationHistory(client, driverName, operation)));
  const view = record?.node;
  const gone = record?.forgotten;
  const heard = (ms: number | undefined) => (ms === undefined ? null : new Date(ms));
  const node: VolumeDescription['node'] = gone
    ? { state: 'forgotten', lastHeartbeat: heard(gone.lastHeartbeat), reason: gone.reason }
    : view
      ? { state: view.live ? 'live' : 'offline', lastHeartbeat: new Date(view.lastHeartbeat), reason: null }
      : { state: 'unknown', lastHeartbeat: null, reason: null };
  return { volumeId, nodeId: parts.nodeId, node, operations };
}

async function operationHistory(
  client: Client,
  driverName: string,
  listed: OperationSummary,
): Promise<OperationHistory> {
  const handle = client.workflow.getHandle(listed.workflowId, listed.runId);
  const [description, history] = await Promise.all([handle.describe(), handle.fetchHistory()]);
  const timeline = buildTimeline(history, listed.type, driverName);
  return {
    // Describe is current where the visibility listing may lag (status, close time, phase).
    ...summarize(description),
    summary: (await description.staticSummary()) ?? null,
    result: timeline.result,
    pendingActivities: (description.raw.pendingActivities ?? []).map(pendingActivity),
    timeline: timeline.events,
  };
}

export function pendingActivity(raw: RawPendingActivity): PendingActivity {
  const started = optionalTsToMs(raw.lastStartedTime);
  let progress: unknown = null;
  const heartbeat = raw.heartbeatDetails?.payloads?.[0];
  try {
    if (heartbeat) progress = defaultPayloadConverter.fromPayload(heartbeat) ?? null;
  } catch {
    // an encoding this client cannot read: shown without progress
  }
  return {
    activityType: raw.activityType?.name ?? '?',
    state: PENDING_STATES[Number(raw.state ?? 0)] ?? String(raw.state),
    attempt: raw.attempt ?? 1,
    lastFailure: raw.lastFailure ? failureText(raw.lastFailure) : null,
    lastStartedTime: started ? new Date(started) : null,
    progress,
  };
}

// A namespace is a DNS label, a claim name a DNS subdomain (Kubernetes' own rules): checking them keeps either from
// breaking out of the quoted query string.
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const CLAIM_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** `NAMESPACE/NAME` as an operator types it; InvalidArgument, saying what is wrong, for anything else. */
export function parseClaim(text: string): { namespace: string; name: string } {
  const [namespace, name, ...rest] = text.split('/');
  if (namespace === undefined || name === undefined || rest.length > 0)
    throw new DriverError(FailureType.InvalidArgument, `--pvc takes NAMESPACE/NAME, not "${text}"`);
  if (!NAMESPACE.test(namespace))
    throw new DriverError(FailureType.InvalidArgument, `"${namespace}" is not a Kubernetes namespace name`);
  if (!CLAIM_NAME.test(name))
    throw new DriverError(FailureType.InvalidArgument, `"${name}" is not a PersistentVolumeClaim name`);
  return { namespace, name };
}

/**
 * A claim's operations, found by the DurableCsiPvcNamespace and DurableCsiPvcName search attributes its creates
 * carry (set from external-provisioner's --extra-create-metadata), then every operation of each volume those
 * creates made (deletions name only the volume, as DeleteVolume does, and are found through its ID).
 */
export async function describeClaim(
  client: Client,
  driverName: string,
  claim: { namespace: string; name: string },
): Promise<ClaimDescription> {
  const { namespace, name } = parseClaim(`${claim.namespace}/${claim.name}`);
  const query =
    `${driverOperationsClause(driverName)} AND ${PvcNamespaceKey.name} = "${namespace}"` +
    ` AND ${PvcNameKey.name} = "${name}"`;
  let creates: OperationSummary[];
  try {
    creates = await listOperations(client, query);
  } catch (error) {
    // The server names the attribute it does not know in the cause (the client's own message is generic).
    const said = `${String(error)} ${String((error as { cause?: unknown }).cause)}`;
    if (said.includes(PvcNamespaceKey.name) || said.includes(PvcNameKey.name))
      throw new DriverError(
        FailureType.FailedPrecondition,
        `the namespace lacks the search attributes ${PvcNamespaceKey.name} and ${PvcNameKey.name}: register them ` +
          "(the controller's start log prints the commands); creates made before that cannot be found by claim",
      );
    throw error;
  }
  const volumeIds = [...new Set(creates.flatMap((create) => create.volumeId ?? []))];
  const [volumes, unplaced] = await Promise.all([
    Promise.all(volumeIds.map((volumeId) => describeVolume(client, driverName, volumeId))),
    Promise.all(
      creates.filter((create) => !create.volumeId).map((create) => operationHistory(client, driverName, create)),
    ),
  ]);
  return { pvc: { namespace, name }, volumes, unplaced };
}
