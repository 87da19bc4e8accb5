/**
 * ControllerGetVolumeHealth and ControllerListVolumeHealth (CSI v1.13, alpha), from the controller's side: what the
 * cluster knows of a volume's node and operations, never from the absence of an answer. A volume whose node is
 * offline or has no record is INACCESSIBLE with the reason (the spec's sense: not accessible from any node; its node
 * is the only one that holds it), never healthy: whether it is well on its node is not known. A volume of a forgotten
 * node, or one whose deletion was written off when its node was forgotten, is DATA_LOSS. A deletion waiting for its
 * node is said too. Volume conditions only the node sees (its loop device, its pool's mount and space) are the node's
 * health RPCs (csi/node-health.ts), read by kubelet. docs/operations.md, "Volume health".
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { formatDuration } from '../common/duration';
import { DriverError, FailureType } from '../common/failures';
import { deleteWorkflowId, NodeIdKey, OperationKey, parseVolumeId, VolumeIdKey } from '../common/names';
import { listNodeRecords, readNodeRecord, type NodeRecordView } from '../node-records/reads';
import type { VolumeProblem } from '../storage/pool/backend';
import type { DeleteVolumeResult } from '../workflows/node-work';
import { driverOperationsClause } from './pending-operations';

export interface VolumeHealthEntry {
  volumeId: string;
  problems: VolumeProblem[];
}

/** What forgetting a node means for the operator, in every message about one. */
const FORGOTTEN_HINT =
  'if the node comes back with its pool, its volumes are there again (`durable-csi nodes describe`)';

/**
 * The volume's problems as the controller sees them. NotFound when this driver never issued the ID, when its deletion
 * ended with the volume gone, or when its live node answers that its pool lacks it (`lookUp`, the node's own pool).
 */
export async function controllerVolumeHealth(
  client: Client,
  driverName: string,
  volumeId: string,
  lookUp: (volumeId: string) => Promise<unknown>,
  now = new Date(),
  readRecord: (nodeId: string) => Promise<NodeRecordView | undefined> = (nodeId) =>
    readNodeRecord(client, driverName, nodeId),
): Promise<VolumeProblem[]> {
  const parts = parseVolumeId(volumeId);
  if (!parts) throw new DriverError(FailureType.NotFound, `volume ${volumeId} was not issued by this driver`);
  const [record, deletion] = await Promise.all([readRecord(parts.nodeId), deletionOf(client, driverName, volumeId)]);
  if (deletion?.done) {
    const { outcome, reason } = deletion.done;
    if (outcome !== 'node-forgotten')
      throw new DriverError(FailureType.NotFound, `volume ${volumeId} was deleted from node ${parts.nodeId}`);
    return [
      {
        status: 'data-loss',
        reason: 'WrittenOff',
        message:
          `the deletion of volume ${volumeId} was answered when node ${parts.nodeId} was forgotten (${reason ?? ''}): ` +
          'it is written off and deleted from that pool if the node ever comes back with it; nothing to do',
      },
    ];
  }
  const problems = nodeProblems(record, parts.nodeId, now);
  if (deletion?.since) {
    problems.push({
      status: 'inaccessible',
      reason: 'DeletionWaiting',
      message:
        `the deletion of volume ${volumeId} has waited ${formatDuration(now.getTime() - deletion.since.getTime())} ` +
        `for node ${parts.nodeId}: its PersistentVolume stays until the node's agent runs it. Bring the agent back, ` +
        `or if the node is gone for good: durable-csi nodes forget ${parts.nodeId}`,
    });
  }
  // A live node answers for its pool: NotFound when the volume is not there (the spec's answer for a volume that
  // does not exist). Not asked while a deletion runs: the answer would race it.
  if (problems.length === 0) await lookUp(volumeId);
  return problems;
}

/** The node's state as a problem of each of its volumes; none for a live node. */
function nodeProblems(record: NodeRecordView | undefined, nodeId: string, now: Date): VolumeProblem[] {
  const since = (ms: number | undefined) =>
    ms === undefined ? 'never reported' : `last heard ${formatDuration(now.getTime() - ms)} ago`;
  if (record?.forgotten) {
    const { reason, at, lastHeartbeat } = record.forgotten;
    return [
      {
        status: 'data-loss',
        reason: 'NodeForgotten',
        message:
          `node ${nodeId} was forgotten at ${at} (${reason}; ${since(lastHeartbeat)}): it was declared gone for ` +
          `good, and this volume with it. Restore the claim from a snapshot or a backup; ${FORGOTTEN_HINT}`,
      },
    ];
  }
  if (!record?.node) {
    return [
      {
        status: 'inaccessible',
        reason: 'NodeUnknown',
        message:
          `node ${nodeId} has no record (its agent never reported, or the record was deleted): nothing can reach ` +
          `this volume, and whether it is well on the node is not known. Start the node agent on ${nodeId}`,
      },
    ];
  }
  if (!record.node.live) {
    return [
      {
        status: 'inaccessible',
        reason: 'NodeOffline',
        message:
          `node ${nodeId} is offline (${since(record.node.lastHeartbeat)}): its agent is down or cannot reach ` +
          'Temporal, so this volume cannot be reached and whether it is well on the node is not known. Bring the ' +
          `agent on ${nodeId} back, or if the node is gone for good: durable-csi nodes forget ${nodeId}`,
      },
    ];
  }
  return [];
}

/** The volume's deletion (its workflow ID derives from the volume ID): waiting since, or done with its result. */
async function deletionOf(
  client: Client,
  driverName: string,
  volumeId: string,
): Promise<{ since?: Date; done?: DeleteVolumeResult } | undefined> {
  const handle = client.workflow.getHandle(deleteWorkflowId(driverName, volumeId));
  try {
    const description = await handle.describe();
    if (description.status.name === 'RUNNING') return { since: description.startTime };
    if (description.status.name !== 'COMPLETED') return undefined;
    return { done: (await handle.result()) as DeleteVolumeResult };
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return undefined;
    throw error;
  }
}

/**
 * The volumes with a problem the controller knows of, sorted by ID, after `after` (a volume ID; '' for the first):
 * those of nodes offline or forgotten (by their records' phase: O(unhealthy nodes), never a table of every node),
 * found through their create operations. A volume whose create retention has removed is not listed
 * (ControllerGetVolumeHealth still answers for it), nor one of a node with no record.
 */
export async function listVolumeHealth(
  client: Client,
  driverName: string,
  after: string,
  maxEntries: number,
  now = new Date(),
): Promise<{ entries: VolumeHealthEntry[]; nextToken: string }> {
  const nodes = [
    ...(await listNodeRecords(client, driverName, { phase: 'offline' })),
    ...(await listNodeRecords(client, driverName, { phase: 'forgotten' })),
  ];
  const volumeIds = new Set<string>();
  for (const node of nodes) {
    const query =
      `${driverOperationsClause(driverName)} AND ${NodeIdKey.name} = "${node.nodeId}" AND ` +
      `${OperationKey.name} = "create" AND ExecutionStatus = "Completed"`;
    for await (const workflow of client.workflow.list({ query })) {
      const volumeId = workflow.typedSearchAttributes.get(VolumeIdKey);
      if (volumeId && parseVolumeId(volumeId) && volumeId > after) volumeIds.add(volumeId);
    }
  }
  const entries: VolumeHealthEntry[] = [];
  const sorted = [...volumeIds].sort();
  // One read of each node's record for the page, not one per volume: a page's volumes share a few nodes.
  const records = new Map<string, Promise<NodeRecordView | undefined>>();
  const readRecord = (nodeId: string) => {
    if (!records.has(nodeId)) records.set(nodeId, readNodeRecord(client, driverName, nodeId));
    return records.get(nodeId)!;
  };
  for (const [index, volumeId] of sorted.entries()) {
    if (maxEntries > 0 && entries.length === maxEntries) return { entries, nextToken: sorted[index - 1] ?? '' };
    try {
      const problems = await controllerVolumeHealth(
        client,
        driverName,
        volumeId,
        async () => undefined,
        now,
        readRecord,
      );
      if (problems.length > 0) entries.push({ volumeId, problems });
    } catch (error) {
      // Deleted since its node went away: not a volume any more.
      if (!(error instanceof DriverError) || error.type !== FailureType.NotFound) throw error;
    }
  }
  return { entries, nextToken: '' };
}
