import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import {
  createGroupSnapshotWorkflowId,
  createSnapshotWorkflowId,
  deleteWorkflowId,
  MOVE_WORKFLOW_TYPES,
  parseVolumeId,
} from '../common/names';
import { listPoolTransfers, type PoolTransfers } from '../operations/move-operations';
import { listPendingOperations } from '../operations/pending-operations';
import type { OperationSummary } from '../operations/pending-operations';
import { SnapshotOperations } from '../operations/snapshot-operations';
import { VolumeOperations } from '../operations/volume-operations';
import type { ListedSnapshot, ListedTransfer, ListedVolume } from '../workflows/listing';
import { listDriverPvs, type DriverPv } from './driver-pvs';
import {
  listDriverGroupSnapshotContents,
  listDriverSnapshotContents,
  type DriverGroupSnapshotContent,
  type DriverSnapshotContent,
} from './snapshot-contents';
import {
  judgeSnapshots,
  type LostSnapshot,
  type PendingSnapshotDeletion,
  type UnclaimedGroupSnapshot,
} from './snapshot-orphans';

/**
 * Where the pools and Kubernetes disagree. Read-only: nothing here deletes anything; an operator decides.
 * - unclaimedVolumes: on a pool, with no PV of this driver, no pending operation and no claim being provisioned.
 * - lostVolumes: PVs of this driver whose node's pool answered without the volume (nodes that did not answer, or
 *   have no record, are not judged: they are listed as unchecked).
 * - deletionsWithoutPv: deletions still pending whose PV is gone (someone removed the PV by hand).
 * - unclaimedSnapshots, lostSnapshots and snapshotDeletionsWithoutContent: the same three for snapshots and
 *   VolumeSnapshotContents (kubernetes/snapshot-orphans.ts); not judged when the cluster has no snapshot CRDs.
 * - unclaimedGroupSnapshots: group snapshots whose members are on a pool with nothing owning them (no
 *   VolumeGroupSnapshotContent, no member's VolumeSnapshotContent, no running group operation); judged with the
 *   snapshots. A member is never listed as an unclaimed snapshot: only its whole group can be deleted.
 * - strandedTransfers: what a move left in a pool's transfers/ (a copy staged on the target, an offer on the
 *   source) with no move of its key running: a move terminated before it could clear them. A move that ends in any
 *   other way (moved, copied, rolled back) clears its own; a running one's are not listed.
 */
export interface OrphanReport {
  generatedAt: Date;
  unclaimedVolumes: ListedVolume[];
  lostVolumes: LostVolume[];
  deletionsWithoutPv: PendingDeletion[];
  unclaimedSnapshots: ListedSnapshot[];
  unclaimedGroupSnapshots: UnclaimedGroupSnapshot[];
  lostSnapshots: LostSnapshot[];
  snapshotDeletionsWithoutContent: PendingSnapshotDeletion[];
  strandedTransfers: ListedTransfer[];
  /** Why the pools' transfers were not checked (a controller older than 0.3.0 runs no listing of them); else absent. */
  transfersNotChecked?: string;
  /** False: the cluster serves no VolumeSnapshotContents (the CRDs are not installed); snapshots were not judged. */
  snapshotCrdsInstalled: boolean;
  /** Registered nodes that did not answer: their volumes and PVs were not judged. */
  uncheckedNodes: string[];
}

export interface LostVolume {
  pv: string;
  volumeHandle: string;
  nodeId: string | null;
  phase: string;
  claim: string | null;
}

export interface PendingDeletion {
  workflowId: string;
  volumeId: string;
  nodeId: string | null;
  startTime: Date;
}

/** The Kubernetes APIs the report reads: PVs and claims (core), VolumeSnapshotContents (custom). */
export interface OrphanKubernetes {
  core: CoreV1Api;
  custom: CustomObjectsApi;
}

/** Visibility (pending operations) lags by a second or so: an operation that just started may be missed once. */
export async function buildOrphanReport(
  client: Client,
  { core, custom }: OrphanKubernetes,
  driverName: string,
): Promise<OrphanReport> {
  const [listing, pending, pvs, provisioning, contents, groupContents, transfers] = await Promise.all([
    new VolumeOperations(client, driverName).list(),
    listPendingOperations(client, driverName),
    listDriverPvs(core, driverName),
    claimsBeingProvisioned(core),
    listDriverSnapshotContents(custom, driverName),
    listDriverGroupSnapshotContents(custom, driverName),
    listPoolTransfers(client, driverName).catch((error: unknown) =>
      error instanceof Error ? error : new Error(String(error)),
    ),
  ]);
  const handles = new Set(pvs.map((pv) => pv.volumeHandle));
  const pendingNames = new Set(pending.map((operation) => operation.volumeName).filter(isString));
  const pendingIds = new Set(pending.map((operation) => operation.volumeId).filter(isString));
  const unchecked = new Set(listing.unreachableNodes);
  const answered = new Set(listing.answeredNodes ?? []);
  const onPools = new Set(listing.volumes.map((volume) => volume.volumeId));

  const unclaimedVolumes = listing.volumes.filter(
    (volume) =>
      !handles.has(volume.volumeId) &&
      !pendingNames.has(volume.name) &&
      !pendingIds.has(volume.volumeId) &&
      !provisioning.has(volume.name),
  );
  const lostVolumes: LostVolume[] = [];
  for (const pv of pvs) {
    if (onPools.has(pv.volumeHandle) || pendingIds.has(pv.volumeHandle)) continue;
    // Lost only when its node's own pool answered without it: a node that has no record (never registered, or
    // its record was lost) or did not answer proves nothing, and is listed as unchecked instead.
    const home = parseVolumeId(pv.volumeHandle)?.nodeId;
    if (home && !answered.has(home)) {
      unchecked.add(home);
      continue;
    }
    if (await deletedAwaitingPvRemoval(client, driverName, pv)) continue;
    lostVolumes.push({
      pv: pv.name,
      volumeHandle: pv.volumeHandle,
      nodeId: pv.nodeId ?? null,
      phase: pv.phase,
      claim: pv.claim ?? null,
    });
  }
  const deletionsWithoutPv = pending
    .filter((operation) => operation.type === 'deleteVolume' && operation.volumeId && !handles.has(operation.volumeId))
    .map((operation: OperationSummary) => ({
      workflowId: operation.workflowId,
      volumeId: operation.volumeId ?? '',
      nodeId: operation.nodeId,
      startTime: operation.startTime,
    }));
  const snapshots =
    contents === 'not-installed'
      ? undefined
      : await snapshotOrphans(
          client,
          driverName,
          pending,
          contents,
          groupContents === 'not-installed' ? [] : groupContents,
        );
  for (const node of snapshots?.uncheckedNodes ?? []) unchecked.add(node);
  const stranded = strandedTransfers(transfers, pending);
  for (const node of stranded.uncheckedNodes) unchecked.add(node);
  return {
    generatedAt: new Date(),
    unclaimedVolumes,
    lostVolumes,
    deletionsWithoutPv,
    unclaimedSnapshots: snapshots?.unclaimedSnapshots ?? [],
    unclaimedGroupSnapshots: snapshots?.unclaimedGroupSnapshots ?? [],
    lostSnapshots: snapshots?.lostSnapshots ?? [],
    snapshotDeletionsWithoutContent: snapshots?.snapshotDeletionsWithoutContent ?? [],
    strandedTransfers: stranded.transfers,
    ...(stranded.notChecked ? { transfersNotChecked: stranded.notChecked } : {}),
    snapshotCrdsInstalled: snapshots !== undefined,
    uncheckedNodes: [...unchecked],
  };
}

/**
 * The transfers whose move is not running. A running move names what it makes `move-<move key>` (its VolumeNameKey),
 * so its transfers are told apart without reading its input. Visibility lags: a move started a second ago may be
 * missed once, but it has no transfer yet (its offer comes after its snapshot).
 */
function strandedTransfers(
  listed: PoolTransfers | Error,
  pending: OperationSummary[],
): { transfers: ListedTransfer[]; uncheckedNodes: string[]; notChecked?: string } {
  if (listed instanceof Error) return { transfers: [], uncheckedNodes: [], notChecked: listed.message };
  const running = new Set(
    pending
      .filter((operation) => MOVE_WORKFLOW_TYPES.includes(operation.type))
      .map((operation) => operation.volumeName),
  );
  return {
    transfers: listed.transfers.filter((transfer) => !running.has(`move-${transfer.moveKey}`)),
    // A pool that listed only some of its transfers is judged on those; the rest are not checked.
    uncheckedNodes: [...listed.unreachableNodes, ...listed.truncatedNodes],
  };
}

/** The pools' snapshots against the contents; the nodes whose snapshots were not listed are unchecked. */
async function snapshotOrphans(
  client: Client,
  driverName: string,
  pending: OperationSummary[],
  contents: DriverSnapshotContent[],
  groupContents: DriverGroupSnapshotContent[],
) {
  const listing = await new SnapshotOperations(client, driverName).list();
  const createPrefix = createSnapshotWorkflowId(driverName, '');
  const createGroupPrefix = createGroupSnapshotWorkflowId(driverName, '');
  const judged = judgeSnapshots({
    onPools: listing.snapshots,
    answeredNodes: listing.answeredNodes ?? [],
    contents,
    pendingCreateNames: new Set([
      ...pending.filter((op) => op.type === 'createSnapshot').map((op) => op.workflowId.slice(createPrefix.length)),
      // A running move's snapshot, named as the move's VolumeName says.
      ...pending.flatMap((op) => (MOVE_WORKFLOW_TYPES.includes(op.type) && op.volumeName ? [op.volumeName] : [])),
    ]),
    // A snapshot's move carries the snapshot ID it moves in its VolumeId attribute.
    movingSnapshotIds: new Set(
      pending.flatMap((op) => (op.type === 'moveSnapshot' && op.volumeId ? [op.volumeId] : [])),
    ),
    // A snapshot's deletion carries the snapshot ID in its VolumeId attribute.
    pendingDeletions: pending.flatMap((op) =>
      op.type === 'deleteSnapshot' && op.volumeId
        ? [{ workflowId: op.workflowId, snapshotId: op.volumeId, nodeId: op.nodeId, startTime: op.startTime }]
        : [],
    ),
    groupContents,
    pendingGroupCreateNames: new Set(
      pending
        .filter((op) => op.type === 'createVolumeGroupSnapshot')
        .map((op) => op.workflowId.slice(createGroupPrefix.length)),
    ),
    // A group's deletion carries the group snapshot ID in its VolumeId attribute.
    pendingGroupDeletionIds: new Set(
      pending.flatMap((op) => (op.type === 'deleteVolumeGroupSnapshot' && op.volumeId ? [op.volumeId] : [])),
    ),
  });
  return { ...judged, uncheckedNodes: [...judged.uncheckedNodes, ...listing.unreachableNodes] };
}

/**
 * The CSI names external-provisioner uses for claims it is provisioning right now (`pvc-<claim UID>`): their
 * volume may exist a moment before the PV does.
 */
async function claimsBeingProvisioned(core: CoreV1Api): Promise<Set<string>> {
  const claims = await core.listPersistentVolumeClaimForAllNamespaces();
  return new Set(
    claims.items
      .filter((claim) => !claim.spec?.volumeName && claim.status?.phase === 'Pending')
      .map((claim) => `pvc-${claim.metadata?.uid}`),
  );
}

/** A Released PV whose deletion completed: the volume is gone and external-provisioner removes the PV next. */
async function deletedAwaitingPvRemoval(client: Client, driverName: string, pv: DriverPv): Promise<boolean> {
  if (pv.phase !== 'Released' && pv.phase !== 'Failed') return false;
  try {
    const description = await client.workflow.getHandle(deleteWorkflowId(driverName, pv.volumeHandle)).describe();
    return description.status.name === 'COMPLETED';
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

function isString(value: string | null): value is string {
  return typeof value === 'string';
}
