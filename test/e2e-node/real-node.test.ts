import type { V1CSINode, V1Pod, V1PodList } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import { CONTENTS, createSnapshot, getOrGone, readySnapshot, snapshotsPath } from '../e2e-k8s/snapshot-objects';
import { DRIVER, NAMESPACE, deployedNode, driverReady } from './deployed-node';
import { classFigures } from './figures';
import { NODE_NAME } from './real-node';
import { RolloutWatch, type Watched } from './rollout-watch';
import { APP_NAMESPACE } from './workloads';
import { eventually } from '../support/eventually';

/**
 * deploy/ as it really runs: a real node (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd
 * and kubelet inside a network and mount namespace of the test's own), the driver's image and the sidecars' images
 * built here, deploy/ applied as shipped (only image names and the Temporal address changed) with
 * components/snapshots and the cluster's snapshot CRDs and snapshot-controller, PVCs mounted into real Pods.
 * docs/kubernetes.md, "The real node".
 */
jest.setTimeout(300_000);

const real = deployedNode(NODE_NAME);
const SNAPSHOTS = snapshotsPath(APP_NAMESPACE);
/** The last field of a volume or snapshot ID: its key, the name of its directory in the pool. */
const keyOf = (id: string | undefined) => (id ?? '').split('_').pop() ?? '';
const snapshotDir = (handle: string) => path.join(real.node.poolDir, 'snapshots', 'data', keyOf(handle));

test('deploy/ runs as Pods: every container Ready, kubelet registered the plugin', async () => {
  const { node } = real;
  const pods = await node.api.get<V1PodList>(`/api/v1/namespaces/${NAMESPACE}/pods`);
  const controllers = pods.items.filter(
    (pod) => pod.metadata?.labels?.['app.kubernetes.io/component'] === 'controller',
  );
  expect(controllers).toHaveLength(2);
  for (const pod of pods.items) {
    const statuses = pod.status?.containerStatuses ?? [];
    expect(statuses.map((s) => [s.name, s.ready])).toEqual(statuses.map((s) => [s.name, true]));
  }
  // The sidecars reach the driver's socket as the manifests run them (not as root with capabilities dropped).
  for (const pod of controllers) {
    const names = (pod.status?.containerStatuses ?? []).map((s) => s.name).sort();
    expect(names).toEqual(['csi-provisioner', 'csi-resizer', 'csi-snapshotter', 'durable-csi']);
  }
  const csiNode = await node.api.get<V1CSINode>(`/apis/storage.k8s.io/v1/csinodes/${NODE_NAME}`);
  expect(csiNode.spec.drivers.map((d) => [d.name, d.nodeID])).toEqual([[DRIVER, NODE_NAME]]);
});

test('a dir PVC mounted by a Pod: written and read, fsGroup applied; deleting the Pod unmounts it', async () => {
  const { node, work } = real;
  await work.claim('dir-1', 'durable-csi-dir');
  await work.pod('dir-1', 'dir-1', { fsGroup: 2000, script: 'echo hello-dir > /data/file' });
  await work.waitRunning('dir-1');
  expect(work.exec('dir-1', 'cat /data/file')).toBe('hello-dir\n');
  expect(work.exec('dir-1', 'stat -c %g /data')).toBe('2000\n');
  const pv = await work.volumeOf('dir-1');
  const handle = pv.spec?.csi?.volumeHandle ?? '';
  expect(pv.spec?.csi?.driver).toBe(DRIVER);
  expect(node.ns.mountinfo()).toContain(pv.metadata?.name ?? 'no PV name');
  await work.deletePod('dir-1');
  expect(node.ns.mountinfo()).not.toContain(pv.metadata?.name ?? 'no PV name');
  // The pool on disk holds the volume (the handle's last part names its directory).
  const onDisk = handle.split('_').pop() ?? handle;
  expect(fs.readdirSync(path.join(node.poolDir, 'volumes'))).toContain(onDisk);

  // Data survives: a new Pod on the same claim reads what the first wrote.
  await work.pod('dir-1b', 'dir-1');
  await work.waitRunning('dir-1b');
  expect(work.exec('dir-1b', 'cat /data/file')).toBe('hello-dir\n');
  await work.deletePod('dir-1b');
  await work.deleteClaim('dir-1');
  await work.waitGone(`/api/v1/persistentvolumes/${pv.metadata?.name}`, `PV of dir-1 (${handle})`);
  expect(fs.readdirSync(path.join(node.poolDir, 'volumes'))).not.toContain(onDisk);
});

test('a dir PVC expanded while its Pod runs: only the reservation grows (no node step); claim, PV and pool agree', async () => {
  const { node, work } = real;
  await work.claim('dir-grow', 'durable-csi-dir', '64Mi');
  await work.pod('dir-grow', 'dir-grow', { script: 'echo before > /data/file' });
  await work.waitRunning('dir-grow');
  await work.expand('dir-grow', '128Mi');
  // The dir backend answers node_expansion_required=false: csi-resizer alone finishes the resize.
  await work.waitCapacity('dir-grow', '128Mi');
  const pv = await work.volumeOf('dir-grow');
  expect(pv.spec?.capacity?.storage).toBe('128Mi');
  const handle = pv.spec?.csi?.volumeHandle ?? '';
  const record = JSON.parse(
    fs.readFileSync(path.join(node.poolDir, 'records', `${handle.split('_').pop()}.json`), 'utf8'),
  ) as { capacityBytes: number };
  expect(record.capacityBytes).toBe(128 * 2 ** 20);
  // The Pod kept its mount throughout.
  expect(work.exec('dir-grow', 'echo after >> /data/file && cat /data/file')).toBe('before\nafter\n');
  await work.deletePod('dir-grow');
  await work.deleteClaim('dir-grow');
  await work.waitGone(`/api/v1/persistentvolumes/${pv.metadata?.name}`, `PV of dir-grow (${handle})`);
});

test('a VolumeSnapshot of a PVC a Pod wrote, a claim restored from it and a clone: their Pods read the data', async () => {
  const { node, work } = real;
  await work.claim('snap-src', 'durable-csi-dir');
  await work.pod('snap-src', 'snap-src', { script: 'echo before > /data/file' });
  await work.waitRunning('snap-src');
  await createSnapshot(node.api, APP_NAMESPACE, 'snap-1', 'snap-src');
  const { content } = await readySnapshot(node.api, APP_NAMESPACE, 'snap-1');
  const handle = content.status?.snapshotHandle ?? '';
  expect(handle).toMatch(new RegExp(`^s1_${NODE_NAME}_`));
  expect(fs.readFileSync(path.join(snapshotDir(handle), 'file'), 'utf8')).toBe('before\n');
  // Written after the snapshot: the restore must not see it, the clone (of the claim as it is now) must.
  work.exec('snap-src', 'echo after > /data/after');
  await work.claim('restored', 'durable-csi-dir', '64Mi', false, {
    apiGroup: 'snapshot.storage.k8s.io',
    kind: 'VolumeSnapshot',
    name: 'snap-1',
  });
  await work.claim('clone', 'durable-csi-dir', '64Mi', false, { kind: 'PersistentVolumeClaim', name: 'snap-src' });
  for (const name of ['restored', 'clone']) await work.pod(name, name);
  for (const name of ['restored', 'clone']) await work.waitRunning(name, 180_000);
  expect(work.exec('restored', 'cat /data/file; test -e /data/after || echo no-after')).toBe('before\nno-after\n');
  expect(work.exec('clone', 'cat /data/file /data/after')).toBe('before\nafter\n');
  // The restore and the clone are volumes of their own: writing to them leaves the source as it was.
  work.exec('restored', 'echo restored > /data/file');
  expect(work.exec('snap-src', 'cat /data/file')).toBe('before\n');

  await node.api.delete(`${SNAPSHOTS}/snap-1`);
  const contentPath = `${CONTENTS}/${content.metadata?.name ?? ''}`;
  await eventually(
    'VolumeSnapshotContent of snap-1 gone',
    async () => !(await getOrGone(node.api, contentPath)),
    120_000,
  );
  expect(fs.existsSync(snapshotDir(handle))).toBe(false);
}, 420_000);

test('rollout restart of the node DaemonSet and controller Deployment while claims go and come: deletions wait, mounted I/O goes on', async () => {
  const { node, work } = real;
  // A Pod appending a numbered, timed line to a mounted volume every 0.2 s, and reading it back.
  await work.claim('writer', 'durable-csi-dir');
  const loop =
    'i=0; while true; do echo "$(date +%s) $i" >> /data/log && tail -n 1 /data/log >/dev/null; i=$((i+1)); sleep 0.2; done';
  await work.pod('writer', 'writer', { script: `{ (${loop}) & }` });
  // Claims whose volumes exist (their Pods ran and went) and are deleted while the node plugin is down.
  const olds = ['old-0', 'old-1', 'old-2', 'old-3'];
  for (const name of olds) {
    await work.claim(name, 'durable-csi-dir');
    await work.pod(name, name, { script: `echo ${name} > /data/f` });
  }
  for (const name of ['writer', ...olds]) await work.waitRunning(name);
  for (const name of olds) await work.deletePod(name);
  const watched: Watched[] = await Promise.all(
    olds.map(async (name) => {
      const pv = await work.volumeOf(name);
      const key = (pv.spec?.csi?.volumeHandle ?? '').split('_').pop() ?? '';
      return { pv: pv.metadata?.name ?? '', dir: path.join(node.poolDir, 'volumes', key) };
    }),
  );
  // Snapshots of the writer's volume, deleted with the claims while the node plugin is down: their contents and
  // copies must stay until it is back (the deletion is the node's to do), then both go.
  const snapshots = ['roll-snap-0', 'roll-snap-1'];
  for (const name of snapshots) await createSnapshot(node.api, APP_NAMESPACE, name, 'writer');
  for (const name of snapshots) {
    const { content } = await readySnapshot(node.api, APP_NAMESPACE, name);
    const contentName = content.metadata?.name ?? '';
    watched.push({
      pv: `VolumeSnapshotContent ${contentName}`,
      dir: snapshotDir(content.status?.snapshotHandle ?? ''),
      path: `${CONTENTS}/${contentName}`,
    });
  }
  for (const { dir } of watched) expect(fs.existsSync(dir)).toBe(true);
  const [oldPlugin] = (await nodePluginPods()).map((pod) => pod.metadata?.uid);
  const oldControllers = (await controllerPods()).map((pod) => pod.metadata?.name);
  // Set once the claims are deleted; the watch reads it from then on.
  const deletion: { at?: number } = {};
  // Whether the plugin runs, from the node's processes: the Pod's container status reaches the API server a second or
  // more after the container starts (kubelet's relist, then its status sync), and a deletion waiting for the agent
  // can end within that lag on a loaded machine, which the statuses would report as done with no plugin running.
  const [only] = node.nodes;
  const watch = new RolloutWatch(
    node,
    watched,
    () => deletion.at,
    () => only?.pluginRunning() ?? false,
  );
  watch.start();
  const started = Date.now();
  node.kubectl([
    'rollout',
    'restart',
    '-n',
    NAMESPACE,
    'daemonset/durable-csi-node',
    'deployment/durable-csi-controller',
  ]);
  // The old node Pod gone and its successor not serving yet: the deletions have to wait for it.
  await eventually(
    'old node plugin Pod gone',
    async () => !(await nodePluginPods()).some((p) => p.metadata?.uid === oldPlugin),
    60_000,
    100,
  );
  deletion.at = Date.now();
  await Promise.all([
    ...olds.map((name) => node.api.delete(`/api/v1/namespaces/default/persistentvolumeclaims/${name}`)),
    ...snapshots.map((name) => node.api.delete(`${SNAPSHOTS}/${name}`)),
  ]);
  // New claims and Pods while both roll.
  const news = ['new-0', 'new-1', 'new-2'];
  for (const name of news) {
    await work.claim(name, 'durable-csi-dir');
    await work.pod(name, name, { script: `echo ${name} > /data/f` });
  }
  await driverReady(node);
  for (const name of news)
    expect(work.exec((await work.waitRunning(name, 180_000)).metadata?.name ?? name, 'cat /data/f')).toBe(`${name}\n`);
  for (const { pv, path: objectPath } of watched)
    await work.waitGone(objectPath ?? `/api/v1/persistentvolumes/${pv}`, pv, 180_000);
  for (const name of snapshots) await work.waitGone(`${SNAPSHOTS}/${name}`, `VolumeSnapshot ${name}`);
  node.timings['rollout: restart -> driver Ready again'] = (Date.now() - started) / 1000;
  await watch.stop();
  expect(watch.violations).toEqual([]);
  node.timings['rollout: PVC or VolumeSnapshot deleted while the node plugin was down -> PV or content gone, max'] =
    Math.max(...watch.waits()) / 1000;
  for (const { dir } of watched) expect(fs.existsSync(dir)).toBe(false);
  expect((await nodePluginPods()).map((pod) => pod.metadata?.uid)).not.toContain(oldPlugin);
  // The controller Deployment rolls on its own (one replica at a time): its old Pods go once their successors are
  // Ready and they have ended, which nothing above waited for.
  await eventually(
    'old controller Pods gone',
    async () => !(await controllerPods()).some((pod) => oldControllers.includes(pod.metadata?.name)),
    120_000,
    500,
  );

  // The writer never stopped: every line there, in order, no pause longer than 3 s, and the pool holds the same.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const log = work.exec('writer', 'cat /data/log');
  const lines = log
    .trim()
    .split('\n')
    .map((line) => line.split(' ').map(Number));
  expect(lines.map(([, i]) => i)).toEqual(lines.map((_, i) => i));
  const times = lines.map(([t]) => t ?? 0);
  expect(Math.max(...times.slice(1).map((t, i) => t - (times[i] ?? t)))).toBeLessThanOrEqual(3);
  // ... from before the restart until now.
  expect(times[0]).toBeLessThanOrEqual(started / 1000);
  expect(Date.now() / 1000 - (times.at(-1) ?? 0)).toBeLessThan(5);
  const writer = await work.volumeOf('writer');
  const writerDir = path.join(node.poolDir, 'volumes', (writer.spec?.csi?.volumeHandle ?? '').split('_').pop() ?? '');
  expect(fs.readFileSync(path.join(writerDir, 'log'), 'utf8').startsWith(log)).toBe(true);
  for (const name of ['writer', ...news]) {
    await work.deletePod(name);
    await work.deleteClaim(name);
  }
  await eventually('pool empty', async () => fs.readdirSync(path.join(node.poolDir, 'volumes')).length === 0, 60_000);
}, 420_000);

function nodePluginPods(): Promise<V1Pod[]> {
  return podsOf('node');
}

function controllerPods(): Promise<V1Pod[]> {
  return podsOf('controller');
}

async function podsOf(component: string): Promise<V1Pod[]> {
  const selector = encodeURIComponent(`app.kubernetes.io/component=${component}`);
  return (await real.node.api.get<V1PodList>(`/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=${selector}`)).items;
}

test('figures: PVC created -> Pod Running and PVC deleted -> PV gone, 30 dir Pods, 5 at a time', async () => {
  await classFigures(real, 'dir', 'durable-csi-dir', '64Mi');
}, 600_000);

test('teardown leaves nothing: no process, mount, loop device, interface or directory', async () => {
  await real.node.stop();
  expect(real.node.leftovers()).toEqual([]);
}, 120_000);
