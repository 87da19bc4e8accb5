import { KubeError, type KubeRest } from './kube-rest';
import type { K8sTools } from './tools';
import { eventually } from '../support/eventually';

/**
 * The snapshot side of a test cluster, shared by the loopback cluster (e2e-k8s/snapshots.test.ts) and the real node
 * (e2e-node): the CRDs and snapshot-controller that deploy/components/snapshots needs first (deploy/README.md,
 * "Snapshots"), and the VolumeSnapshot calls the tests make.
 */
export const SNAPSHOT_CLASS = 'durable-csi';
export const CONTENTS = '/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents';
/** The snapshot and group snapshot CRDs, each the installer's file and its name once applied. */
export const SNAPSHOT_CRDS = [
  ['volumesnapshotclasses-crd', 'volumesnapshotclasses.snapshot.storage.k8s.io'],
  ['volumesnapshotcontents-crd', 'volumesnapshotcontents.snapshot.storage.k8s.io'],
  ['volumesnapshots-crd', 'volumesnapshots.snapshot.storage.k8s.io'],
  ['volumegroupsnapshotclasses-crd', 'volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io'],
  ['volumegroupsnapshotcontents-crd', 'volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io'],
  ['volumegroupsnapshots-crd', 'volumegroupsnapshots.groupsnapshot.storage.k8s.io'],
] as const;

export const snapshotsPath = (namespace: string) =>
  `/apis/snapshot.storage.k8s.io/v1/namespaces/${namespace}/volumesnapshots`;

export interface VolumeSnapshot {
  metadata?: { name?: string; deletionTimestamp?: string };
  status?: { readyToUse?: boolean; boundVolumeSnapshotContentName?: string; restoreSize?: string };
}
export interface VolumeSnapshotContent {
  metadata?: { name?: string; deletionTimestamp?: string };
  spec?: { driver?: string; deletionPolicy?: string; source?: { volumeHandle?: string; snapshotHandle?: string } };
  status?: { readyToUse?: boolean; snapshotHandle?: string; restoreSize?: number };
}

/**
 * The snapshot and group snapshot CRDs applied server-side as the admin (through `kubectl`), and Established: before
 * the snapshot-controller and csi-snapshotter start, which look for the group kinds once and run without group
 * snapshots when they are missing.
 */
export function applySnapshotCrds(kubectl: (args: string[]) => unknown, tools: K8sTools): void {
  for (const [file] of SNAPSHOT_CRDS)
    kubectl(['apply', '--server-side', '--field-manager=e2e-admin', '-f', tools[file]]);
  kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...SNAPSHOT_CRDS.map(([, name]) => `crd/${name}`)]);
}

/**
 * The snapshot-controller's arguments. Upstream's Deployment runs one with leader election; one process here. Its
 * deletion retries are capped at 30 s (default 5 min), as the driver's sidecars are, so the tests do not wait for a
 * long backoff. The group snapshot gate is GA and on by default in v8.7.0, as deploy/README.md has the cluster run it.
 * Verbosity 5: what it decides on a deletion (the being-deleted annotation it sets on a content, the finalizers it
 * removes) is logged at 5 only, and that is what a content left undeleted needs (about 2.5 MB for the storage suite's
 * CI selection; a failed suite run keeps the log: test/e2e-node/storage-suite/keep-logs.ts).
 */
export function snapshotControllerArgs(kubeconfig: string): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    '--leader-election=false',
    '--retry-interval-max=30s',
    // v8.7.0's client defaults (5 requests/s, bursts of 10) held 318 of its requests up to 1 s each in a CI run of the
    // storage suite, and so its VolumeGroupSnapshot's bound finalizer, which it adds only once the group is ready:
    // the suite deleted the group in that second, and its retained content lost its deletion for good (upstream's
    // race; deploy/README.md, "Snapshots", says what an operator sees and does).
    '--kube-api-qps=50',
    '--kube-api-burst=100',
    '--v=5',
  ];
}

export async function createSnapshot(api: KubeRest, namespace: string, name: string, claim: string): Promise<void> {
  await api.create(snapshotsPath(namespace), {
    apiVersion: 'snapshot.storage.k8s.io/v1',
    kind: 'VolumeSnapshot',
    metadata: { name },
    spec: { volumeSnapshotClassName: SNAPSHOT_CLASS, source: { persistentVolumeClaimName: claim } },
  });
}

/** The snapshot once readyToUse, and its content. */
export async function readySnapshot(
  api: KubeRest,
  namespace: string,
  name: string,
): Promise<{ snapshot: VolumeSnapshot; content: VolumeSnapshotContent }> {
  const snapshot = await eventually(
    `VolumeSnapshot ${name} readyToUse`,
    async () => {
      const current = await api.get<VolumeSnapshot>(`${snapshotsPath(namespace)}/${name}`);
      return current.status?.readyToUse === true ? current : undefined;
    },
    120_000,
    500,
  );
  const content = await api.get<VolumeSnapshotContent>(
    `${CONTENTS}/${snapshot.status?.boundVolumeSnapshotContentName ?? ''}`,
  );
  return { snapshot, content };
}

/** The object, or undefined once the API server answers 404. */
export async function getOrGone<T>(api: KubeRest, apiPath: string): Promise<T | undefined> {
  try {
    return await api.get<T>(apiPath);
  } catch (error) {
    if (error instanceof KubeError && error.status === 404) return undefined;
    throw error;
  }
}

export const GROUP_SNAPSHOT_CLASS = 'durable-csi';
export const GROUP_CONTENTS = '/apis/groupsnapshot.storage.k8s.io/v1/volumegroupsnapshotcontents';
export const groupSnapshotsPath = (namespace: string) =>
  `/apis/groupsnapshot.storage.k8s.io/v1/namespaces/${namespace}/volumegroupsnapshots`;

export interface VolumeGroupSnapshot {
  metadata?: { name?: string; deletionTimestamp?: string };
  status?: { readyToUse?: boolean; boundVolumeGroupSnapshotContentName?: string; error?: { message?: string } };
}
export interface VolumeGroupSnapshotContent {
  metadata?: { name?: string; deletionTimestamp?: string };
  spec?: { driver?: string; deletionPolicy?: string; source?: { volumeHandles?: string[] } };
  status?: {
    readyToUse?: boolean;
    volumeGroupSnapshotHandle?: string;
    volumeSnapshotInfoList?: { volumeHandle: string; snapshotHandle: string }[];
  };
}
/** A VolumeSnapshot the snapshot-controller made for a group's member: its status names the group. */
export type MemberSnapshot = VolumeSnapshot & { status?: { volumeGroupSnapshotName?: string } };

/** A VolumeGroupSnapshot of the claims of the namespace that carry every label of `matchLabels`. */
export async function createGroupSnapshot(
  api: KubeRest,
  namespace: string,
  name: string,
  matchLabels: Record<string, string>,
): Promise<void> {
  await api.create(groupSnapshotsPath(namespace), {
    apiVersion: 'groupsnapshot.storage.k8s.io/v1',
    kind: 'VolumeGroupSnapshot',
    metadata: { name },
    spec: { volumeGroupSnapshotClassName: GROUP_SNAPSHOT_CLASS, source: { selector: { matchLabels } } },
  });
}

/**
 * The group snapshot once readyToUse, and its content. An error in its status is not yet a failure (an ABORTED
 * create is retried), but a timeout names the last one.
 */
export async function readyGroupSnapshot(
  api: KubeRest,
  namespace: string,
  name: string,
): Promise<{ group: VolumeGroupSnapshot; content: VolumeGroupSnapshotContent }> {
  const group = await eventually(
    `VolumeGroupSnapshot ${name} readyToUse`,
    async () => {
      const current = await api.get<VolumeGroupSnapshot>(`${groupSnapshotsPath(namespace)}/${name}`);
      if (current.status?.readyToUse === true) return current;
      if (current.status?.error) throw new Error(`status error: ${current.status.error.message ?? '(no message)'}`);
      return undefined;
    },
    120_000,
    250,
  );
  const content = await api.get<VolumeGroupSnapshotContent>(
    `${GROUP_CONTENTS}/${group.status?.boundVolumeGroupSnapshotContentName ?? ''}`,
  );
  return { group, content };
}

/** The VolumeSnapshots the snapshot-controller made for the group's members. */
export async function memberSnapshots(api: KubeRest, namespace: string, group: string): Promise<MemberSnapshot[]> {
  const list = await api.get<{ items: MemberSnapshot[] }>(snapshotsPath(namespace));
  return list.items.filter((snapshot) => snapshot.status?.volumeGroupSnapshotName === group);
}
