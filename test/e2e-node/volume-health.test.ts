import { APP_NAMESPACE } from './workloads';
import { DRIVER, deployedNode } from './deployed-node';
import { eventually } from '../support/eventually';

/**
 * What kubelet v1.37.2 really does with the driver's health (CSIVolumeHealth on, alpha; docs/operations.md,
 * "Volume health"): its volume health manager calls NodeGetVolumeHealth for every mounted CSI volume of a Pod and
 * writes the conditions into the Pod's status.volumeHealth, and NodeGetStorageHealth into the CSINode's
 * status.storageHealth, every volumeStatsAggPeriod (2 s here). Nothing in Kubernetes v1.37.2 writes the PVC's
 * status.healthStatus (a controller-side component that calls ControllerGetVolumeHealth would), and kubelet no longer
 * reads NodeGetVolumeStats' volume_condition. The pool disk is unmounted under a running Pod (lazily, as its loop
 * devices keep it busy) and mounted again: the condition appears where v1.37.2 puts it, then goes.
 */
jest.setTimeout(300_000);

const POOL_IN_NODE = '/var/lib/durable-csi/pool';
const real = deployedNode('dcsi-health', ['loop-backend'], 'ext4', 'node', undefined, { volumeHealth: true });

interface Condition {
  status: string;
  reason: string;
  message?: string;
}
interface PodHealth {
  status?: { volumeHealth?: { name: string; healthConditions?: Condition[] }[] };
}
interface CsiNodeHealth {
  status?: { storageHealth?: { name: string; healthConditions?: Condition[] }[] };
}
interface ClaimHealth {
  status?: { healthStatus?: unknown };
}

test('kubelet v1.37.2 with CSIVolumeHealth: a pool disk unmounted under a running Pod shows in the Pod and the CSINode, and goes once mounted again', async () => {
  const { node, work } = real;
  await work.claim('health-1', 'durable-csi-loop-ext4', '64Mi');
  await work.pod('health-1', 'health-1', { script: 'echo hello > /data/file' });
  await work.waitRunning('health-1');

  const podConditions = async () =>
    (await node.api.get<PodHealth>(`/api/v1/namespaces/${APP_NAMESPACE}/pods/health-1`)).status?.volumeHealth?.find(
      (entry) => entry.name === 'data',
    )?.healthConditions ?? [];
  const nodeConditions = async () =>
    (await node.api.get<CsiNodeHealth>(`/apis/storage.k8s.io/v1/csinodes/${node.name}`)).status?.storageHealth?.find(
      (entry) => entry.name === DRIVER,
    )?.healthConditions ?? [];
  const claimHealth = async () =>
    (await node.api.get<ClaimHealth>(`/api/v1/namespaces/${APP_NAMESPACE}/persistentvolumeclaims/health-1`)).status
      ?.healthStatus;

  // Healthy: kubelet probes (its log says so) and writes no condition.
  expect(await podConditions()).toEqual([]);
  expect(await nodeConditions()).toEqual([]);

  // The pool's disk goes away under the running Pod (the host's unmount reaches the node plugin: HostToContainer).
  const line = node.ns
    .mountinfo()
    .split('\n')
    .find((entry) => entry.split(' ')[4] === POOL_IN_NODE);
  const disk = line?.split(' - ')[1]?.split(' ')[1];
  if (!disk) throw new Error(`no pool disk mounted at ${POOL_IN_NODE} in node ${node.name}`);
  const broken = Date.now();
  node.ns.exec('umount', ['--lazy', POOL_IN_NODE]);
  try {
    await eventually('the condition in the CSINode', async () => (await nodeConditions()).length > 0, 60_000);
    await eventually('the condition in the Pod', async () => (await podConditions()).length > 0, 60_000);
    node.timings['pool disk unmounted -> condition in the CSINode and the Pod (s)'] = (Date.now() - broken) / 1000;
    const message = expect.stringMatching(
      new RegExp(`^node ${node.name}: pool directory ${POOL_IN_NODE} holds no pool identity.*Mount the disk`),
    );
    expect(await nodeConditions()).toEqual([
      expect.objectContaining({ status: 'StorageUnreachable', reason: 'PoolNotMounted', message }),
    ]);
    expect(await podConditions()).toEqual([{ status: 'Inaccessible', reason: 'PoolNotMounted', message }]);
    // v1.37.2 writes no PVC health: that would be a controller-side component's job.
    expect(await claimHealth()).toBeUndefined();
  } finally {
    node.ns.exec('mount', [disk, POOL_IN_NODE]);
  }
  const mended = Date.now();
  await eventually('the CSINode clear', async () => (await nodeConditions()).length === 0, 60_000);
  await eventually('the Pod clear', async () => (await podConditions()).length === 0, 60_000);
  node.timings['pool disk mounted again -> conditions gone (s)'] = (Date.now() - mended) / 1000;
  expect(work.exec('health-1', 'cat /data/file')).toBe('hello\n');
  expect(await claimHealth()).toBeUndefined();
});
