import type { V1CSINode, V1PersistentVolume, V1Pod, V1PodList } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import { DRIVER, NAMESPACE, deployedNode, driverReady } from './deployed-node';
import { classFigures } from './figures';
import { eventually } from '../support/eventually';

/**
 * deploy/ with components/loop-backend on a real node (docs/kubernetes.md, "The real node"): ext4 and xfs
 * filesystems and raw block devices on loop devices, mounted into Pods by kubelet; expansion through csi-resizer
 * and kubelet. Loop devices are the machine's, not the namespace's: node.loopDevices() picks the pool's.
 */
jest.setTimeout(300_000);

const real = deployedNode('dcsi-loop', ['loop-backend']);

const FILESYSTEMS = [
  { name: 'ext4-1', storageClass: 'durable-csi-loop-ext4', size: '64Mi', fsType: 'ext4' },
  // xfs needs 300 MiB at least.
  { name: 'xfs-1', storageClass: 'durable-csi-loop-xfs', size: '300Mi', fsType: 'xfs' },
] as const;
const BLOCK = 'block-1';
const ALL = [...FILESYSTEMS.map((f) => f.name), BLOCK];

function volumesOnDisk(): string[] {
  return fs.readdirSync(path.join(real.node.poolDir, 'volumes'));
}

function pvName(pv: V1PersistentVolume): string {
  return pv.metadata?.name ?? 'no PV name';
}

/** The volume's image in the pool as the host sees it (the handle's last part names its directory). */
function imageOf(pv: V1PersistentVolume): string {
  const handle = pv.spec?.csi?.volumeHandle ?? '';
  return path.join(real.node.poolDir, 'volumes', handle.split('_').pop() ?? handle, 'disk.img');
}

async function podsOnEveryClaim(suffix: string, write: boolean): Promise<void> {
  const { work } = real;
  for (const { name } of FILESYSTEMS)
    await work.pod(`${name}${suffix}`, name, {
      fsGroup: 2000,
      script: write ? `echo hello-${name} > /data/file` : undefined,
    });
  const script = write ? `printf hello-${BLOCK} | dd of=/dev/xvda bs=512 count=1 conv=sync,fsync` : undefined;
  await work.pod(`${BLOCK}${suffix}`, BLOCK, { block: true, script });
  for (const name of ALL) await real.work.waitRunning(`${name}${suffix}`);
}

function expectData(suffix: string): void {
  const { work } = real;
  for (const { name, fsType } of FILESYSTEMS) {
    const pod = `${name}${suffix}`;
    expect(work.exec(pod, 'cat /data/file')).toBe(`hello-${name}\n`);
    expect(work.exec(pod, 'stat -c %g /data /data/file')).toBe('2000\n2000\n');
    expect(work.exec(pod, 'awk \'$2 == "/data" {print $3}\' /proc/mounts')).toBe(`${fsType}\n`);
  }
  expect(work.exec(`${BLOCK}${suffix}`, 'dd if=/dev/xvda bs=13 count=1 2>/dev/null')).toBe(`hello-${BLOCK}`);
}

/** Deletes the Pods, then waits for NodeUnpublish and NodeUnstage: no mount of the volumes, no loop device. */
async function deletePodsAndWaitUnstaged(suffix: string, pvs: V1PersistentVolume[]): Promise<void> {
  for (const name of ALL) await real.work.deletePod(`${name}${suffix}`);
  await eventually(
    'volumes unmounted and loop devices detached',
    async () => {
      const mounts = real.node.ns.mountinfo();
      return pvs.every((pv) => !mounts.includes(pvName(pv))) && real.node.loopDevices().length === 0;
    },
    30_000,
  ).catch((error: unknown) => {
    throw new Error(`${String(error)}\nloop devices: ${JSON.stringify(real.node.loopDevices())}`);
  });
}

test('deploy/ with the loop-backend component: the node plugin runs the loop backend and is registered', async () => {
  const csiNode = await real.node.api.get<V1CSINode>(`/apis/storage.k8s.io/v1/csinodes/${real.node.name}`);
  expect(csiNode.spec.drivers.map((d) => [d.name, d.nodeID])).toEqual([[DRIVER, real.node.name]]);
  const args = real.node.kubectl(['get', 'ds', '-n', 'durable-csi', 'durable-csi-node', '-o', 'jsonpath={.spec}']);
  expect(args).toContain('--backend=loop');
});

test('loop ext4, loop xfs and raw block PVCs in Pods: written, read, fsGroup; Pods deleted -> unstaged, detached; data survives', async () => {
  const { work, node } = real;
  for (const { name, storageClass, size } of FILESYSTEMS) await work.claim(name, storageClass, size);
  await work.claim(BLOCK, 'durable-csi-loop-ext4', '64Mi', true);
  await podsOnEveryClaim('', true);
  expectData('');
  const pvs = await Promise.all(ALL.map((name) => work.volumeOf(name)));
  // Each volume is a preallocated image of its size in the pool, attached as one loop device, mounted in the Pod.
  expect(pvs.map((pv) => fs.statSync(imageOf(pv)).size)).toEqual([64, 300, 64].map((mib) => mib * 2 ** 20));
  // One device per volume, and kubelet's own over the raw block one while a Pod maps it.
  expect(node.loopDevices().map((device) => device.kubelet)).toEqual([true, false, false, false]);
  const mounts = node.ns.mountinfo();
  for (const pv of pvs) expect(mounts).toContain(pvName(pv));

  await deletePodsAndWaitUnstaged('', pvs);
  expect(volumesOnDisk()).toHaveLength(3);

  // Data survives: new Pods on the same claims read what the first ones wrote.
  await podsOnEveryClaim('-b', false);
  expectData('-b');
  expect(node.loopDevices()).toHaveLength(4);
  await deletePodsAndWaitUnstaged('-b', pvs);

  for (const name of ALL) await work.deleteClaim(name);
  for (const pv of pvs) await work.waitGone(`/api/v1/persistentvolumes/${pvName(pv)}`, `PV ${pvName(pv)}`);
  expect(volumesOnDisk()).toEqual([]);
  expect(node.loopDevices()).toEqual([]);
});

/** CAP_SYS_RESOURCE (bit 24) in this machine's bounding set, which containerd and so the node plugin inherit. */
function nodeHasSysResource(): boolean {
  const bounding = /^CapBnd:\s+([0-9a-f]+)$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '0';
  return (BigInt(`0x${bounding}`) & (1n << 24n)) !== 0n;
}

/** The filesystem in the Pod grew to about `bytes` (df shows it less its metadata), its data intact. */
async function expectGrown(pod: string, claim: string, size: string, bytes: number, before: number): Promise<void> {
  const { work } = real;
  await work.waitCapacity(claim, size);
  const pv = await work.volumeOf(claim);
  expect(pv.spec?.capacity?.storage).toBe(size);
  expect(fs.statSync(imageOf(pv)).size).toBe(bytes);
  expect(work.dataBytes(pod)).toBeGreaterThan(before + (bytes - before) / 2);
  expect(work.exec(pod, 'echo after >> /data/file && cat /data/file')).toBe('before\nafter\n');
}

test('expansion through csi-resizer and kubelet: loop xfs grows under its running Pod, loop ext4 online or at the next stage', async () => {
  const { work } = real;
  const MiB = 2 ** 20;
  await work.claim('xfs-grow', 'durable-csi-loop-xfs', '300Mi');
  await work.claim('ext4-grow', 'durable-csi-loop-ext4', '64Mi');
  for (const name of ['xfs-grow', 'ext4-grow']) await work.pod(name, name, { script: 'echo before > /data/file' });
  for (const name of ['xfs-grow', 'ext4-grow']) await work.waitRunning(name);
  const [xfsBefore, ext4Before] = ['xfs-grow', 'ext4-grow'].map((name) => work.dataBytes(name));
  await work.expand('xfs-grow', '400Mi');
  await work.expand('ext4-grow', '128Mi');
  // xfs_growfs needs no more than the privileged container has: online, the Pod keeps running.
  await expectGrown('xfs-grow', 'xfs-grow', '400Mi', 400 * MiB, xfsBefore ?? 0);
  if (nodeHasSysResource()) {
    await expectGrown('ext4-grow', 'ext4-grow', '128Mi', 128 * MiB, ext4Before ?? 0);
  } else {
    // Growing a mounted ext4 needs CAP_SYS_RESOURCE, which this machine's root lacks: NodeExpandVolume says so,
    // the Pod keeps its old size, and the next staging (a new Pod) grows it before mounting.
    await eventually(
      'ext4-grow: NodeExpandVolume refused for want of CAP_SYS_RESOURCE',
      async () =>
        ((await work.getClaim('ext4-grow')).status?.conditions ?? []).some(
          (c) => c.type === 'NodeResizeError' && /CAP_SYS_RESOURCE/.test(c.message ?? ''),
        ),
      60_000,
    );
    expect(work.dataBytes('ext4-grow')).toBe(ext4Before);
    await work.deletePod('ext4-grow');
    await work.pod('ext4-grow-b', 'ext4-grow');
    await work.waitRunning('ext4-grow-b');
    await expectGrown('ext4-grow-b', 'ext4-grow', '128Mi', 128 * MiB, ext4Before ?? 0);
  }
  for (const [pod, claim] of [
    ['xfs-grow', 'xfs-grow'],
    [nodeHasSysResource() ? 'ext4-grow' : 'ext4-grow-b', 'ext4-grow'],
  ] as const) {
    const pv = await work.volumeOf(claim);
    await work.deletePod(pod);
    await work.deleteClaim(claim);
    await work.waitGone(`/api/v1/persistentvolumes/${pvName(pv)}`, `PV ${pvName(pv)}`);
  }
  expect(volumesOnDisk()).toEqual([]);
  expect(real.node.loopDevices()).toEqual([]);
});

test('the node plugin Pod killed while kubelet stages volumes: the Pods start once the plugin is back', async () => {
  const { node, work } = real;
  const names = ['kill-0', 'kill-1', 'kill-2'];
  for (const name of names) {
    await work.claim(name, 'durable-csi-loop-ext4', '64Mi');
    await work.pod(name, name, { script: `echo ${name} > /data/f` });
  }
  // As soon as a volume exists, kubelet stages it (attach, mount) for its Pod: kill the plugin then.
  await eventually(
    'a claim Bound',
    async () => (await Promise.all(names.map((n) => work.getClaim(n)))).some((c) => c.status?.phase === 'Bound'),
    60_000,
    50,
  );
  const [old] = await nodePluginPods();
  node.kubectl(['delete', 'pod', '-n', NAMESPACE, old?.metadata?.name ?? 'none', '--grace-period=0', '--force']);
  const startedBefore = (await Promise.all(names.map((n) => work.getPod(n)))).filter(
    (p) => p.status?.phase === 'Running',
  );
  // Not every Pod was running when the plugin went: their staging was cut off or had not begun.
  expect(startedBefore.length).toBeLessThan(names.length);
  for (const name of names) {
    await work.waitRunning(name, 180_000);
    expect(work.exec(name, 'cat /data/f')).toBe(`${name}\n`);
  }
  await driverReady(node);
  expect((await nodePluginPods()).map((p) => p.metadata?.uid)).not.toContain(old?.metadata?.uid);
  expect(node.loopDevices()).toHaveLength(3);
  const pvs = await Promise.all(names.map((n) => work.volumeOf(n)));
  for (const name of names) await work.deletePod(name);
  for (const name of names) await work.deleteClaim(name);
  for (const pv of pvs) await work.waitGone(`/api/v1/persistentvolumes/${pvName(pv)}`, `PV ${pvName(pv)}`);
  expect(volumesOnDisk()).toEqual([]);
  await eventually('loop devices detached', async () => node.loopDevices().length === 0, 30_000);
});

async function nodePluginPods(): Promise<V1Pod[]> {
  const selector = encodeURIComponent('app.kubernetes.io/component=node');
  return (await real.node.api.get<V1PodList>(`/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=${selector}`)).items;
}

test('figures: PVC created -> Pod Running and PVC deleted -> PV gone, 30 Pods per loop class, 5 at a time', async () => {
  await classFigures(real, 'loop ext4', 'durable-csi-loop-ext4', '64Mi');
  await classFigures(real, 'loop xfs', 'durable-csi-loop-xfs', '300Mi');
  expect(real.node.loopDevices()).toEqual([]);
}, 900_000);

test('teardown leaves nothing: no process, mount, loop device, interface or directory', async () => {
  await real.node.stop();
  expect(real.node.leftovers()).toEqual([]);
}, 120_000);
