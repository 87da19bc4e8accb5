import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { readNodeRecord } from '../node-records/reads';
import { DriverError, FailureType } from '../common/failures';
import { VolumeIdKey, parseVolumeId } from '../common/names';
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

const PENDING_STATES = ['unspecified', 'scheduled', 'started', 'cancel-requested', 'paused', 'pause-requested'];

/**
 * Every operation recorded for a volume (its create, deletions, expansions, each run) with its timeline. Found
 * through the DurableCsiVolumeId search attribute, which the create sets once it has placed the volume.
 */
export async function describeVolume(client: Client, driverName: string, volumeId: string): Promise<VolumeDescription> {
  const parts = parseVolumeId(volumeId);
  if (!parts) throw new DriverError(FailureType.NotFound, `"${volumeId}" is not a volume ID this driver issued`);
  // parseVolumeId admits only [a-z0-9._-], so the ID is safe inside the quoted query string.
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

function pendingActivity(raw: RawPendingActivity): PendingActivity {
  const started = optionalTsToMs(raw.lastStartedTime);
  return {
    activityType: raw.activityType?.name ?? '?',
    state: PENDING_STATES[Number(raw.state ?? 0)] ?? String(raw.state),
    attempt: raw.attempt ?? 1,
    lastFailure: raw.lastFailure ? failureText(raw.lastFailure) : null,
    lastStartedTime: started ? new Date(started) : null,
  };
}
