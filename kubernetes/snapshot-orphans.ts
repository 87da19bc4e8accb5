import type { ListedSnapshot } from '../workflows/listing';
import type { DriverSnapshotContent } from './snapshot-contents';

/** A VolumeSnapshotContent of this driver whose snapshot its node's pool answered without. */
export interface LostSnapshot {
  content: string;
  snapshotHandle: string;
  nodeId: string | null;
}

/** A running deleteSnapshot workflow, as the visibility store lists it. */
export interface PendingSnapshotDeletion {
  workflowId: string;
  snapshotId: string;
  nodeId: string | null;
  startTime: Date;
}

export interface SnapshotOrphans {
  /** On a pool, named by no VolumeSnapshotContent, with no pending operation. */
  unclaimedSnapshots: ListedSnapshot[];
  lostSnapshots: LostSnapshot[];
  /** Deletions still pending whose VolumeSnapshotContent is gone (someone removed its finalizer by hand). */
  snapshotDeletionsWithoutContent: PendingSnapshotDeletion[];
  /** Nodes a content names that did not answer (or have no record): their contents were not judged. */
  uncheckedNodes: string[];
}

/**
 * Where the pools' snapshots and the VolumeSnapshotContents disagree, by the rules the volumes follow
 * (kubernetes/orphan-report.ts): a copy being made (its create pending, or a content waiting for its handle) or
 * deleted is nobody's orphan, only a node whose own pool answered can make a content lost, and a deletion still
 * pending whose snapshot no content names is reported as PVs' are (`deletion-without-pv`).
 */
export function judgeSnapshots(input: {
  onPools: ListedSnapshot[];
  answeredNodes: string[];
  contents: DriverSnapshotContent[];
  /** CSI names of the snapshots whose createSnapshot workflow is running. */
  pendingCreateNames: Set<string>;
  /** The running deleteSnapshot workflows. */
  pendingDeletions: PendingSnapshotDeletion[];
}): SnapshotOrphans {
  const handles = new Set(input.contents.map((content) => content.snapshotHandle));
  const pendingDeletionIds = new Set(input.pendingDeletions.map((deletion) => deletion.snapshotId));
  const requested = new Set(input.contents.map((content) => content.requestedName));
  const onPools = new Set(input.onPools.map((snapshot) => snapshot.snapshotId));
  const answered = new Set(input.answeredNodes);
  const unclaimedSnapshots = input.onPools.filter(
    (snapshot) =>
      !handles.has(snapshot.snapshotId) &&
      !requested.has(snapshot.name) &&
      !input.pendingCreateNames.has(snapshot.name) &&
      !pendingDeletionIds.has(snapshot.snapshotId),
  );
  const lostSnapshots: LostSnapshot[] = [];
  const unchecked = new Set<string>();
  for (const content of input.contents) {
    const handle = content.snapshotHandle;
    if (!handle || content.deleting || onPools.has(handle) || pendingDeletionIds.has(handle)) continue;
    if (content.nodeId && !answered.has(content.nodeId)) {
      unchecked.add(content.nodeId);
      continue;
    }
    lostSnapshots.push({ content: content.name, snapshotHandle: handle, nodeId: content.nodeId ?? null });
  }
  const snapshotDeletionsWithoutContent = input.pendingDeletions.filter(
    (deletion) => !handles.has(deletion.snapshotId),
  );
  return { unclaimedSnapshots, lostSnapshots, snapshotDeletionsWithoutContent, uncheckedNodes: [...unchecked] };
}
