import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { controlTaskQueue, nodeRecordWorkflowId, NODE_MEMO_KEY, OperationKey, PhaseKey } from '../common/names';
import type { ForgottenNode, NodeRecordMemo, NodeReport, NodeView } from '../common/names';

/**
 * Reading node records (workflows/node-presence.ts). One node: DescribeWorkflowExecution, answered by the server
 * without any worker, with liveness taken from the server's own state of the presence activity. Many nodes:
 * a visibility listing (eventually consistent), used only where every node is wanted (listings, metrics) or as
 * a bounded sample.
 */
export interface NodeRecordView {
  nodeId: string;
  /** Undefined while the record exists but its agent has not reported yet (made by `nodes forget` alone). */
  node?: NodeView;
  forgotten?: ForgottenNode;
  /** Epoch ms of the figures in `node` (the agent's latest presence heartbeat, or its last report). */
  asOf?: number;
  /**
   * Volumes and snapshot copies written off while the node was forgotten, still to delete on its pool (the record
   * retries them, also while the node is live); absent when none.
   */
  writtenOff?: number;
  /**
   * True while the record's hold has ended (its agent stopped, died or renewed it) and the record has not yet
   * taken in how: until then `node` holds the figures of the hold's start, up to an hour old (the agent's latest
   * ones arrive with the hold's end). Shown offline; a decision on its counts waits until this clears.
   */
  settling?: boolean;
}

/** pendingActivities[].state of a started activity (temporal.api.enums.v1.PendingActivityState). */
export const PENDING_ACTIVITY_STARTED = 2;

/** One node's record as the server holds it now; undefined when no record exists (never proof of anything). */
export async function readNodeRecord(
  client: Client,
  driverName: string,
  nodeId: string,
): Promise<NodeRecordView | undefined> {
  let description;
  try {
    description = await client.workflow.getHandle(nodeRecordWorkflowId(driverName, nodeId)).describe();
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return undefined;
    throw error;
  }
  const memo = description.memo?.[NODE_MEMO_KEY] as NodeRecordMemo | undefined;
  const running = description.status.name === 'RUNNING';
  const hold = running
    ? description.raw.pendingActivities?.find(
        (activity) => activity.activityType?.name === 'holdPresence' && activity.state === PENDING_ACTIVITY_STARTED,
      )
    : undefined;
  if (!memo?.record) return { nodeId, forgotten: memo?.forgotten, writtenOff: memo?.writtenOff };
  const heartbeat = hold?.heartbeatDetails?.payloads?.[0];
  const latest = heartbeat ? defaultPayloadConverter.fromPayload<NodeReport>(heartbeat) : undefined;
  const heardAt = hold?.lastHeartbeatTime ? timestampMs(hold.lastHeartbeatTime) : undefined;
  const asOf = latest && heardAt ? heardAt : memo.record.lastHeartbeat;
  return {
    nodeId,
    node: { ...memo.record, ...latest, lastHeartbeat: asOf, live: hold !== undefined },
    forgotten: memo.forgotten,
    asOf,
    writtenOff: memo.writtenOff,
    ...(running && memo.live && !hold ? { settling: true } : {}),
  };
}

/** The clause selecting this driver's node records in visibility. */
export function nodeRecordsQuery(driverName: string, phase?: 'live' | 'offline' | 'forgotten'): string {
  const clauses = [
    `TaskQueue = "${controlTaskQueue(driverName)}"`,
    'WorkflowType = "nodePresence"',
    'ExecutionStatus = "Running"',
    `${OperationKey.name} = "node"`,
  ];
  if (phase) clauses.push(`${PhaseKey.name} = "${phase}"`);
  return clauses.join(' AND ');
}

/** Node records from visibility: figures as of each record's last memo update (report or liveness change). */
export async function listNodeRecords(
  client: Client,
  driverName: string,
  options: { phase?: 'live' | 'offline' | 'forgotten'; limit?: number } = {},
): Promise<NodeRecordView[]> {
  const found: NodeRecordView[] = [];
  const listing = client.workflow.list({ query: nodeRecordsQuery(driverName, options.phase), pageSize: 100 });
  for await (const workflow of listing) {
    const view = fromListing(workflow);
    if (view) found.push(view);
    if (options.limit !== undefined && found.length >= options.limit) break;
  }
  return found.sort((a, b) => a.nodeId.localeCompare(b.nodeId));
}

function fromListing(workflow: WorkflowExecutionInfo): NodeRecordView | undefined {
  const memo = workflow.memo?.[NODE_MEMO_KEY] as NodeRecordMemo | undefined;
  if (!memo) return undefined;
  const node = memo.record ? { ...memo.record, live: memo.live } : undefined;
  return {
    nodeId: memo.nodeId,
    node,
    forgotten: memo.forgotten,
    asOf: memo.record?.lastHeartbeat,
    writtenOff: memo.writtenOff,
  };
}

/** Every node that has a record and has reported, with liveness as visibility last saw it. */
export async function listNodeViews(client: Client, driverName: string): Promise<NodeView[]> {
  return (await listNodeRecords(client, driverName)).flatMap((view) => (view.node ? [view.node] : []));
}

/**
 * The named nodes' records, read fresh (nodes without a record left out); without names, every node with a record
 * that is not forgotten: O(nodes), for the topology-less GetCapacity only.
 */
export async function readNodeViews(client: Client, driverName: string, nodeIds?: string[]): Promise<NodeView[]> {
  const records = nodeIds
    ? await Promise.all(nodeIds.map((nodeId) => readNodeRecord(client, driverName, nodeId)))
    : (await readAllNodeRecords(client, driverName)).filter((record) => !record.forgotten);
  return records.flatMap((record) => (record?.node ? [record.node] : []));
}

/** Records are described this many at a time when read fresh. */
const READ_CONCURRENCY = 16;

/**
 * Every record, listed from visibility and then each described (current liveness, the agent's latest figures):
 * O(nodes) reads, for operator views and the topology-less GetCapacity only, never for a volume operation.
 */
export async function readAllNodeRecords(client: Client, driverName: string): Promise<NodeRecordView[]> {
  const listed = await listNodeRecords(client, driverName);
  const fresh: NodeRecordView[] = [];
  for (let start = 0; start < listed.length; start += READ_CONCURRENCY) {
    const batch = listed.slice(start, start + READ_CONCURRENCY);
    const read = await Promise.all(batch.map((view) => readNodeRecord(client, driverName, view.nodeId)));
    // A record that ended since it was listed keeps its listed figures.
    batch.forEach((view, index) => fresh.push(read[index] ?? view));
  }
  return fresh;
}

function timestampMs(timestamp: { seconds?: unknown; nanos?: number | null }): number {
  return Number(timestamp.seconds ?? 0) * 1000 + Math.floor((timestamp.nanos ?? 0) / 1e6);
}
