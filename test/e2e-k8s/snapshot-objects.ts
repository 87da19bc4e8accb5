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
const CRDS = ['volumesnapshotclasses-crd', 'volumesnapshotcontents-crd', 'volumesnapshots-crd'] as const;

export const snapshotsPath = (namespace: string) =>
  `/apis/snapshot.storage.k8s.io/v1/namespaces/${namespace}/volumesnapshots`;

export interface VolumeSnapshot {
  metadata?: { name?: string; deletionTimestamp?: string };
  status?: { readyToUse?: boolean; boundVolumeSnapshotContentName?: string; restoreSize?: string };
}
export interface VolumeSnapshotContent {
  metadata?: { name?: string; deletionTimestamp?: string };
  spec?: { driver?: string; deletionPolicy?: string; source?: { volumeHandle?: string } };
  status?: { readyToUse?: boolean; snapshotHandle?: string; restoreSize?: number };
}

/** The snapshot CRDs applied server-side as the admin (through `kubectl`), and Established. */
export function applySnapshotCrds(kubectl: (args: string[]) => unknown, tools: K8sTools): void {
  for (const crd of CRDS) kubectl(['apply', '--server-side', '--field-manager=e2e-admin', '-f', tools[crd]]);
  kubectl([
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    ...['volumesnapshotclasses', 'volumesnapshotcontents', 'volumesnapshots'].map(
      (plural) => `crd/${plural}.snapshot.storage.k8s.io`,
    ),
  ]);
}

/**
 * The snapshot-controller's arguments. Upstream's Deployment runs one with leader election; one process here. Its
 * deletion retries are capped at 30 s (default 5 min), as the driver's sidecars are, so the tests do not wait for a
 * long backoff. No group snapshot CRDs here: with the gate on it looks for them for 30 s (--retry-crd-interval-max)
 * before it starts.
 */
export function snapshotControllerArgs(kubeconfig: string): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    '--leader-election=false',
    '--retry-interval-max=30s',
    '--feature-gates=CSIVolumeGroupSnapshot=false',
    '--v=2',
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
