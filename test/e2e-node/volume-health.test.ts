import fs from 'node:fs';
import path from 'node:path';
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

  const podConditions = () => podHealth('health-1');
  const claimHealth = async () =>
    (await node.api.get<ClaimHealth>(`/api/v1/namespaces/${APP_NAMESPACE}/persistentvolumeclaims/health-1`)).status
      ?.healthStatus;

  // Healthy: kubelet probes every 2 s and writes no condition.
  expect(await podConditions()).toEqual([]);
  expect(await nodeConditions()).toEqual([]);

  // The disk goes away on the node (lazily: the volume's loop device keeps it busy). The running node plugin keeps
  // its own view of it (a hostPath's own mount is not propagated, only mounts beneath it), so it is restarted, as
  // after a reboot whose data disk is late: its pool gate refuses the empty directory.
  const disk = poolDisk();
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

test('kubelet v1.37.2 with CSIVolumeHealth: a pool filesystem that an error made read-only (mountinfo still says rw) shows in the Pod and the CSINode', async () => {
  const { node, work } = real;
  await work.claim('health-2', 'durable-csi-loop-ext4', '64Mi');
  await work.pod('health-2', 'health-2', { script: 'echo hello > /data/file' });
  await work.waitRunning('health-2');
  const disk = poolDisk();
  expect(disk).toMatch(/^\/dev\/loop\d+$/); // the error below goes to the node's own pool disk, never the host's
  expect(await nodeConditions()).toEqual([]);
  // The pool disk as an operator mounts it (errors=remount-ro), then an error on it as a failing disk makes one:
  // ext4 aborts its journal and refuses every write from then on, while mountinfo keeps `rw` on current kernels.
  // The repair (unmount, fsck, mount) and the conditions going are test/unit/storage/pool-health's.
  node.ns.exec('mount', ['-o', 'remount,errors=remount-ro', POOL_IN_NODE]);
  const broken = Date.now();
  fs.writeFileSync(`/sys/fs/ext4/${path.basename(disk)}/trigger_fs_error`, '1');
  const readOnly = async (conditions: Promise<Condition[]>) =>
    (await conditions).some((condition) => condition.reason === 'PoolReadOnly');
  await eventually('PoolReadOnly in the CSINode', () => readOnly(nodeConditions()), 60_000);
  await eventually('PoolReadOnly in the Pod', () => readOnly(podHealth('health-2')), 60_000);
  node.timings['pool filesystem stopped by an error -> condition in the CSINode and the Pod (s)'] =
    (Date.now() - broken) / 1000;
  const message = expect.stringMatching(
    new RegExp(`^node ${node.name}: the filesystem holding pool ${POOL_IN_NODE} .* refuses writes \\(EROFS\\)`),
  );
  expect(await nodeConditions()).toEqual([
    expect.objectContaining({ status: 'StorageDegraded', reason: 'PoolReadOnly', message }),
  ]);
  expect(await podHealth('health-2')).toEqual([{ status: 'Degraded', reason: 'PoolReadOnly', message }]);
  // The volume still reads: degraded, not inaccessible.
  expect(work.exec('health-2', 'cat /data/file')).toBe('hello\n');
  // The node goes here: the file's cleanup deletes the claims and waits for their volumes, whose deletion the
  // read-only pool refuses (it waits, as it should, until the pool is repaired, which needs the disk unmounted).
  await node.stop();
});

/** The conditions kubelet wrote into a Pod's status for its volume `data`. */
async function podHealth(pod: string): Promise<Condition[]> {
  const status = (await real.node.api.get<PodHealth>(`/api/v1/namespaces/${APP_NAMESPACE}/pods/${pod}`)).status;
  return status?.volumeHealth?.find((entry) => entry.name === 'data')?.healthConditions ?? [];
}

/** The conditions kubelet wrote into the node's CSINode for the driver's storage. */
async function nodeConditions(): Promise<Condition[]> {
  const csiNode = await real.node.api.get<CsiNodeHealth>(`/apis/storage.k8s.io/v1/csinodes/${real.node.name}`);
  return csiNode.status?.storageHealth?.find((entry) => entry.name === DRIVER)?.healthConditions ?? [];
}

/** The device mounted at the pool directory in the node. */
function poolDisk(): string {
  const line = real.node.ns
    .mountinfo()
    .split('\n')
    .find((entry) => entry.split(' ')[4] === POOL_IN_NODE);
  const disk = line?.split(' - ')[1]?.split(' ')[1];
  if (!disk) throw new Error(`no pool disk mounted at ${POOL_IN_NODE} in node ${real.node.name}`);
  return disk;
}

async function nodePluginPods(): Promise<V1Pod[]> {
  const selector = encodeURIComponent('app.kubernetes.io/component=node');
  return (await real.node.api.get<V1PodList>(`/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=${selector}`)).items;
}
