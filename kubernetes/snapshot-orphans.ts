import type { ListedSnapshot } from '../workflows/listing';
import type { DriverGroupSnapshotContent, DriverSnapshotContent } from './snapshot-contents';

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

/**
 * A group snapshot whose members are on a pool (snapshot copies named `<group name>/<volume key>`, each recorded with
 * its group) with nothing that owns them: no VolumeGroupSnapshotContent names the group (nor one waiting for its
 * handle, by its requested name `groupsnapshot-<UID>`), no VolumeSnapshotContent names a member, and no group
 * operation is running. Only the whole group can be deleted (a member's DeleteSnapshot is refused).
 */
export interface UnclaimedGroupSnapshot {
  groupSnapshotId: string;
  /** The group's CSI name (the members' names up to their last `/`). */
  name: string;
  nodeId: string;
  memberSnapshotIds: string[];
  sizeBytes: number;
}

export interface SnapshotOrphans {
  /** On a pool, named by no VolumeSnapshotContent, with no pending operation; group members are not listed here. */
  unclaimedSnapshots: ListedSnapshot[];
  unclaimedGroupSnapshots: UnclaimedGroupSnapshot[];
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
  /**
   * Snapshot IDs a running moveSnapshot workflow moves: between its switch and its retirement the source's copy is
   * named by no content, and the move deletes it next.
   */
  movingSnapshotIds?: Set<string>;
  /** The VolumeGroupSnapshotContents of this driver (none when the cluster lacks their CRD). */
  groupContents?: DriverGroupSnapshotContent[];
  /** CSI names of the groups whose createVolumeGroupSnapshot workflow is running. */
  pendingGroupCreateNames?: Set<string>;
  /** Group snapshot IDs whose deleteVolumeGroupSnapshot workflow is running. */
  pendingGroupDeletionIds?: Set<string>;
}): SnapshotOrphans {
  const handles = new Set(input.contents.map((content) => content.snapshotHandle));
  const pendingDeletionIds = new Set(input.pendingDeletions.map((deletion) => deletion.snapshotId));
  const requested = new Set(input.contents.map((content) => content.requestedName));
  const onPools = new Set(input.onPools.map((snapshot) => snapshot.snapshotId));
  const answered = new Set(input.answeredNodes);
  const unclaimed = input.onPools.filter(
    (snapshot) =>
      !handles.has(snapshot.snapshotId) &&
      !requested.has(snapshot.name) &&
      !input.pendingCreateNames.has(snapshot.name) &&
      !pendingDeletionIds.has(snapshot.snapshotId) &&
      !input.movingSnapshotIds?.has(snapshot.snapshotId),
  );
  const unclaimedSnapshots = unclaimed.filter((snapshot) => snapshot.groupSnapshotId === undefined);
  const unclaimedGroupSnapshots = judgeGroupMembers(
    unclaimed.filter((snapshot) => snapshot.groupSnapshotId !== undefined),
    input,
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
  return {
    unclaimedSnapshots,
    unclaimedGroupSnapshots,
    lostSnapshots,
    snapshotDeletionsWithoutContent,
    uncheckedNodes: [...unchecked],
  };
}

/**
 * Members no VolumeSnapshotContent names, by group: a group is owned by a VolumeGroupSnapshotContent naming its
 * handle, by one waiting for its handle whose requested name is the group's, or by its running create (by name) or
 * deletion (by ID); otherwise it is an orphan, with every member the pool holds. A member one content names keeps
 * its group from the list (its members are the CO's, though another member's content may be missing).
 */
function judgeGroupMembers(
  members: ListedSnapshot[],
  input: Parameters<typeof judgeSnapshots>[0],
): UnclaimedGroupSnapshot[] {
  const contents = input.groupContents ?? [];
  const handles = new Set(contents.map((content) => content.groupSnapshotHandle));
  const requested = new Set(contents.map((content) => content.requestedName));
  const claimedMembers = new Set(input.contents.map((content) => content.snapshotHandle));
  const claimedGroups = new Set(
    input.onPools.filter((snapshot) => claimedMembers.has(snapshot.snapshotId)).map((s) => s.groupSnapshotId),
  );
  const byGroup = new Map<string, UnclaimedGroupSnapshot>();
  for (const member of members) {
    const groupSnapshotId = member.groupSnapshotId as string;
    const name = member.name.slice(0, Math.max(0, member.name.lastIndexOf('/')));
    if (
      handles.has(groupSnapshotId) ||
      requested.has(name) ||
      claimedGroups.has(groupSnapshotId) ||
      input.pendingGroupCreateNames?.has(name) ||
      input.pendingGroupDeletionIds?.has(groupSnapshotId)
    )
      continue;
    const group = byGroup.get(groupSnapshotId) ?? {
      groupSnapshotId,
      name,
      nodeId: member.nodeId,
      memberSnapshotIds: [],
      sizeBytes: 0,
    };
    group.memberSnapshotIds.push(member.snapshotId);
    group.sizeBytes += member.sizeBytes;
    byGroup.set(groupSnapshotId, group);
  }
  return [...byGroup.values()];
}
