import { APP_NAMESPACE } from './workloads';
import type { V1Pod, V1PodList } from '@kubernetes/client-node';
import { DRIVER, NAMESPACE, deployedNode, driverReady } from './deployed-node';
import { eventually } from '../support/eventually';

/**
 * What kubelet v1.37.2 really does with the driver's health (CSIVolumeHealth on, alpha; docs/operations.md,
 * "Volume health"): its volume health manager calls NodeGetVolumeHealth for every mounted CSI volume of a Pod and
 * writes the conditions into the Pod's status.volumeHealth, and NodeGetStorageHealth into the CSINode's
 * status.storageHealth, every volumeStatsAggPeriod (2 s here). Nothing in Kubernetes v1.37.2 writes the PVC's
 * status.healthStatus (a controller-side component that calls ControllerGetVolumeHealth would), and kubelet no longer
 * reads NodeGetVolumeStats' volume_condition. The pool disk is not mounted when the node plugin starts (unmounted
 * lazily under a running Pod, the plugin restarted: its pool gate refuses the empty directory), then mounted again:
 * the condition appears where v1.37.2 puts it, then goes.
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

test('kubelet v1.37.2 with CSIVolumeHealth: the pool disk not mounted when the node plugin starts shows in the Pod and the CSINode, and goes once it is mounted', async () => {
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

  // Healthy: kubelet probes every 2 s and writes no condition.
  expect(await podConditions()).toEqual([]);
  expect(await nodeConditions()).toEqual([]);

  // The disk goes away on the node (lazily: the volume's loop device keeps it busy). The running node plugin keeps
  // its own view of it (a hostPath's own mount is not propagated, only mounts beneath it), so it is restarted, as
  // after a reboot whose data disk is late: its pool gate refuses the empty directory.
  const line = node.ns
    .mountinfo()
    .split('\n')
    .find((entry) => entry.split(' ')[4] === POOL_IN_NODE);
  const disk = line?.split(' - ')[1]?.split(' ')[1];
  if (!disk) throw new Error(`no pool disk mounted at ${POOL_IN_NODE} in node ${node.name}`);
  node.ns.exec('umount', ['--lazy', POOL_IN_NODE]);
  const broken = Date.now();
  try {
    const [plugin] = await nodePluginPods();
    node.kubectl(['delete', 'pod', '-n', NAMESPACE, plugin?.metadata?.name ?? 'none', '--grace-period=0', '--force']);
    await eventually('the condition in the CSINode', async () => (await nodeConditions()).length > 0, 90_000);
    await eventually('the condition in the Pod', async () => (await podConditions()).length > 0, 60_000);
    node.timings['pool disk gone, plugin restarted -> condition in the CSINode and the Pod (s)'] =
      (Date.now() - broken) / 1000;
    const message = expect.stringMatching(
      new RegExp(`^node ${node.name}: pool ${POOL_IN_NODE} has no pool identity .*mount it there`),
    );
    expect(await nodeConditions()).toEqual([
      expect.objectContaining({ status: 'StorageUnreachable', reason: 'PoolRefused', message }),
    ]);
    expect(await podConditions()).toEqual([{ status: 'Inaccessible', reason: 'PoolRefused', message }]);
    // v1.37.2 writes no PVC health: that would be a controller-side component's job.
    expect(await claimHealth()).toBeUndefined();
  } finally {
    node.ns.exec('mount', [disk, POOL_IN_NODE]);
  }
  // The mount reaches the plugin (beneath its hostPath: HostToContainer); its gate looks again every 10 s.
  const mended = Date.now();
  await eventually('the CSINode clear', async () => (await nodeConditions()).length === 0, 60_000);
  await eventually('the Pod clear', async () => (await podConditions()).length === 0, 60_000);
  node.timings['pool disk mounted again -> conditions gone (s)'] = (Date.now() - mended) / 1000;
  expect(work.exec('health-1', 'cat /data/file')).toBe('hello\n');
  expect(await claimHealth()).toBeUndefined();
  await driverReady(node);
});

async function nodePluginPods(): Promise<V1Pod[]> {
  const selector = encodeURIComponent('app.kubernetes.io/component=node');
  return (await real.node.api.get<V1PodList>(`/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=${selector}`)).items;
}
