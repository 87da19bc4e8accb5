import { proxyActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities, NodeSnapshotList } from '../activities/node-activities';
import { pastNode } from '../common/list-position';
import { formatSnapshotId } from '../common/snapshot-id';
import { formatVolumeId, poolIdPrefix } from '../common/volume-id';
import { unlessSilent } from './list-page-builder';
import { listOptions } from './node-activity-options';

export interface ListSnapshotsInput {
  driverName: string;
  /** Only these nodes (a ListSnapshots by snapshot or source volume ID names its node); every node when absent. */
  nodeIds?: string[];
}

export interface ListedSnapshot {
  snapshotId: string;
  /** The CSI name it was created under (CreateSnapshotRequest.name), as its node recorded it. */
  name: string;
  sourceVolumeId: string;
  nodeId: string;
  sizeBytes: number;
  createdAt: string;
}

export interface ListSnapshotsResult {
  /** Sorted by snapshot ID. */
  snapshots: ListedSnapshot[];
  /** Nodes asked that did not answer (offline, or no answer in time): their snapshots are missing. */
  unreachableNodes: string[];
  /** Nodes whose pools answered (absent in results of earlier releases): the orphan report judges only these. */
  answeredNodes?: string[];
}

/** Node records read per control activity, and nodes asked at once. */
const NODES_PER_READ = 64;
const NODES_AT_ONCE = 8;
/** Every node's list in one result stays far below Temporal's 2 MB payload limit only up to this many. */
const MAX_SNAPSHOTS = 5000;

const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 3 } });

/**
 * Every snapshot of the named (or all) live nodes, in one result: what controllers of earlier releases start, kept
 * for them during a rollout (this release pages, listSnapshotsPage). Its result names every node whose snapshots it
 * does not hold in full (not asked once the bound was reached, or cut by it) as unreachable, never as answered.
 */
export async function listSnapshots(input: ListSnapshotsInput): Promise<ListSnapshotsResult> {
  const nodes: { nodeId: string; live: boolean }[] = [];
  if (input.nodeIds) {
    for (const nodeId of input.nodeIds) nodes.push({ nodeId, live: true });
  } else {
    let after = '';
    for (;;) {
      const page = await control.readNodesAfter({ after, limit: NODES_PER_READ });
      nodes.push(...page.nodes);
      if (!page.more || page.nodes.length === 0) break;
      after = pastNode(page.nodes[page.nodes.length - 1]!.nodeId);
    }
  }
  const snapshots: ListedSnapshot[] = [];
  const unreachableNodes: string[] = [];
  const answeredNodes: string[] = [];
  let asked = 0;
  while (asked < nodes.length && snapshots.length < MAX_SNAPSHOTS) {
    const batch = nodes.slice(asked, asked + NODES_AT_ONCE);
    asked += batch.length;
    const answers = await Promise.all(batch.map((node) => askNode(input.driverName, node.nodeId, node.live)));
    for (const [index, answer] of answers.entries()) {
      if (!answer) {
        unreachableNodes.push(batch[index]!.nodeId);
        continue;
      }
      answeredNodes.push(answer.nodeId);
      snapshots.push(...listedSnapshots(answer));
    }
  }
  unreachableNodes.push(...nodes.slice(asked).map((node) => node.nodeId));
  snapshots.sort((a, b) => (a.snapshotId < b.snapshotId ? -1 : a.snapshotId > b.snapshotId ? 1 : 0));
  const cut = new Set(snapshots.slice(MAX_SNAPSHOTS).map((snapshot) => snapshot.nodeId));
  unreachableNodes.push(...cut);
  return {
    snapshots: snapshots.slice(0, MAX_SNAPSHOTS),
    unreachableNodes,
    answeredNodes: answeredNodes.filter((nodeId) => !cut.has(nodeId)),
  };
}

/** A node's snapshots as a listing shows them: IDs formed from the pool that answered. */
export function listedSnapshots(answer: NodeSnapshotList): ListedSnapshot[] {
  const prefix = poolIdPrefix(answer.poolId);
  return answer.snapshots.map((snapshot) => ({
    snapshotId: formatSnapshotId({ nodeId: answer.nodeId, poolIdPrefix: prefix, key: snapshot.key }),
    name: snapshot.name,
    sourceVolumeId: formatVolumeId({ nodeId: answer.nodeId, poolIdPrefix: prefix, key: snapshot.sourceKey }),
    nodeId: answer.nodeId,
    sizeBytes: snapshot.sizeBytes,
    createdAt: snapshot.createdAt,
  }));
}

/** Undefined when the node is offline, did not pick the work up in 5 s, or failed. */
async function askNode(driverName: string, nodeId: string, live: boolean): Promise<NodeSnapshotList | undefined> {
  if (!live) return undefined;
  const onNode = proxyActivities<NodeActivities>(listOptions(driverName, nodeId));
  return unlessSilent(() => onNode.listSnapshotsOnNode());
}
