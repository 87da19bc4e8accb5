import type { CustomObjectsApi } from '@kubernetes/client-node';
import { parseGroupSnapshotId, parseSnapshotId } from '../common/names';
import { statusOf } from './api-status';

/** A VolumeSnapshotContent of this driver, reduced to what the orphan report reasons about. */
export interface DriverSnapshotContent {
  name: string;
  /** status.snapshotHandle (made by CreateSnapshot) or spec.source.snapshotHandle (pre-provisioned); none yet. */
  snapshotHandle: string | undefined;
  /** The home node named by the handle; undefined for none, or a handle this driver could not have issued. */
  nodeId: string | undefined;
  /**
   * The CSI name external-snapshotter gives the snapshot it is creating for this content: `snapshot-<UID of the
   * VolumeSnapshot>` (its default --snapshot-name-prefix). The copy may exist a moment before the handle does.
   */
  requestedName: string | undefined;
  /** Being deleted: it goes, with its copy or without; never "lost". */
  deleting: boolean;
  /** The VolumeSnapshot it is bound to (spec.volumeSnapshotRef): where a restore names it (copy-placement.ts). */
  snapshotRef?: { namespace: string; name: string };
}

/** The API the snapshot CRDs serve (external-snapshotter's client/config/crd). */
export const SNAPSHOT_CONTENTS = {
  group: 'snapshot.storage.k8s.io',
  version: 'v1',
  plural: 'volumesnapshotcontents',
} as const;

interface VolumeSnapshotContent {
  metadata?: { name?: string; deletionTimestamp?: string };
  spec?: {
    driver?: string;
    source?: { snapshotHandle?: string };
    volumeSnapshotRef?: { uid?: string; namespace?: string; name?: string };
  };
  status?: { snapshotHandle?: string; restoreSize?: number; volumeGroupSnapshotHandle?: string };
}

/**
 * Every VolumeSnapshotContent whose driver is ours (one list call; they are cluster-scoped), or 'not-installed'
 * when the cluster serves no such resource (the snapshot CRDs are an add-on: a 404 is an answer, not a failure).
 */
export async function listDriverSnapshotContents(
  custom: CustomObjectsApi,
  driverName: string,
): Promise<DriverSnapshotContent[] | 'not-installed'> {
  const ours = await listOurs<VolumeSnapshotContent>(custom, SNAPSHOT_CONTENTS, driverName);
  return ours === 'not-installed' ? ours : ours.map(toDriverContent);
}

/**
 * Every object of a cluster-scoped snapshot resource whose spec names our driver (one list call), or
 * 'not-installed' when the cluster serves no such resource (the CRDs are an add-on: a 404 is an answer).
 */
async function listOurs<T extends { spec?: { driver?: string } }>(
  custom: CustomObjectsApi,
  resource: { group: string; version: string; plural: string },
  driverName: string,
): Promise<T[] | 'not-installed'> {
  let list: { items?: T[] };
  try {
    list = (await custom.listClusterCustomObject({ ...resource })) as { items?: T[] };
  } catch (error) {
    if (statusOf(error) === 404) return 'not-installed';
    throw error;
  }
  return (list.items ?? []).filter((item) => item.spec?.driver === driverName);
}

/** A snapshot `nodes evacuate` moves: one a VolumeSnapshot is bound to, on the node. */
export interface EvacuatedSnapshot {
  snapshotId: string;
  /** The VolumeSnapshot, namespace/name. */
  volumeSnapshot: string;
  sizeBytes: number;
  /** A member of this group snapshot (its handle): not moved, a group moves whole or not at all. */
  groupSnapshotHandle?: string;
}

/**
 * The snapshots on the node that the cluster names: every content of our driver whose handle is on the node, bound
 * to a VolumeSnapshot and not being deleted (a copy no content names is the orphan report's, not a move's). None
 * when the cluster serves no snapshot CRDs.
 */
export async function evacuationSnapshots(
  custom: CustomObjectsApi,
  driverName: string,
  nodeId: string,
): Promise<EvacuatedSnapshot[]> {
  const ours = await listOurs<VolumeSnapshotContent>(custom, SNAPSHOT_CONTENTS, driverName);
  if (ours === 'not-installed') return [];
  return ours.flatMap((content) => {
    const { snapshotHandle, nodeId: home, deleting, snapshotRef } = toDriverContent(content);
    if (!snapshotHandle || home !== nodeId || deleting || !snapshotRef) return [];
    const group = content.status?.volumeGroupSnapshotHandle;
    return [
      {
        snapshotId: snapshotHandle,
        volumeSnapshot: `${snapshotRef.namespace}/${snapshotRef.name}`,
        sizeBytes: Number(content.status?.restoreSize ?? 0),
        ...(group ? { groupSnapshotHandle: group } : {}),
      },
    ];
  });
}

function toDriverContent(content: VolumeSnapshotContent): DriverSnapshotContent {
  const snapshotHandle = content.status?.snapshotHandle || content.spec?.source?.snapshotHandle || undefined;
  const ref = content.spec?.volumeSnapshotRef;
  const uid = ref?.uid;
  return {
    name: content.metadata?.name ?? '',
    snapshotHandle,
    nodeId: snapshotHandle ? parseSnapshotId(snapshotHandle)?.nodeId : undefined,
    requestedName: !snapshotHandle && uid ? `snapshot-${uid}` : undefined,
    deleting: content.metadata?.deletionTimestamp !== undefined,
    ...(ref?.namespace && ref.name ? { snapshotRef: { namespace: ref.namespace, name: ref.name } } : {}),
  };
}

/** A VolumeGroupSnapshotContent of this driver, reduced to what the orphan report reasons about. */
export interface DriverGroupSnapshotContent {
  name: string;
  /**
   * status.volumeGroupSnapshotHandle (made by CreateVolumeGroupSnapshot) or
   * spec.source.groupSnapshotHandles.volumeGroupSnapshotHandle (pre-provisioned); none yet.
   */
  groupSnapshotHandle: string | undefined;
  nodeId: string | undefined;
  /**
   * The CSI name csi-snapshotter gives the group it is creating for this content: `groupsnapshot-<UID of the
   * VolumeGroupSnapshot>` (its default --groupsnapshot-name-prefix); the members are named `<that>/<volume key>` on
   * the pool. The members may exist a moment before the handle does.
   */
  requestedName: string | undefined;
  deleting: boolean;
}

/** The API the group snapshot CRDs serve (external-snapshotter's client/config/crd, groupsnapshot.storage.k8s.io). */
export const GROUP_SNAPSHOT_CONTENTS = {
  group: 'groupsnapshot.storage.k8s.io',
  version: 'v1',
  plural: 'volumegroupsnapshotcontents',
} as const;

interface VolumeGroupSnapshotContent {
  metadata?: { name?: string; deletionTimestamp?: string };
  spec?: {
    driver?: string;
    source?: { groupSnapshotHandles?: { volumeGroupSnapshotHandle?: string } };
    volumeGroupSnapshotRef?: { uid?: string };
  };
  status?: { volumeGroupSnapshotHandle?: string };
}

/**
 * Every VolumeGroupSnapshotContent whose driver is ours, or 'not-installed' when the cluster serves none (the group
 * snapshot CRDs come with the snapshot ones, but a cluster may lack them: then no group can be claimed there).
 */
export async function listDriverGroupSnapshotContents(
  custom: CustomObjectsApi,
  driverName: string,
): Promise<DriverGroupSnapshotContent[] | 'not-installed'> {
  const ours = await listOurs<VolumeGroupSnapshotContent>(custom, GROUP_SNAPSHOT_CONTENTS, driverName);
  return ours === 'not-installed' ? ours : ours.map(toDriverGroupContent);
}

function toDriverGroupContent(content: VolumeGroupSnapshotContent): DriverGroupSnapshotContent {
  const groupSnapshotHandle =
    content.status?.volumeGroupSnapshotHandle ||
    content.spec?.source?.groupSnapshotHandles?.volumeGroupSnapshotHandle ||
    undefined;
  const uid = content.spec?.volumeGroupSnapshotRef?.uid;
  return {
    name: content.metadata?.name ?? '',
    groupSnapshotHandle,
    nodeId: groupSnapshotHandle ? parseGroupSnapshotId(groupSnapshotHandle)?.nodeId : undefined,
    requestedName: !groupSnapshotHandle && uid ? `groupsnapshot-${uid}` : undefined,
    deleting: content.metadata?.deletionTimestamp !== undefined,
  };
}
