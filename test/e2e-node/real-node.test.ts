import type { V1CSINode, V1DaemonSet, V1Deployment, V1PodList } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import { summarize } from '../bench/stats';
import { eventually } from '../e2e-k8s/processes';
import { writeOverlay } from './deploy-overlay';
import { imageRef, nodeImages, type ImageTars } from './images';
import { NODE_NAME, NODE_TEMPORAL_ADDRESS, RealNode } from './real-node';
import { Workloads } from './workloads';

/**
 * deploy/ as it really runs: a real node (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd
 * and kubelet inside a network and mount namespace of the test's own), the driver's image and the sidecars' images
 * built here, deploy/ applied as shipped (only image names and the Temporal address changed), PVCs mounted into
 * real Pods. docs/kubernetes.md, "The real node".
 */
jest.setTimeout(300_000);

const NAMESPACE = 'durable-csi';
const DRIVER = 'durable-csi.io';
const node = new RealNode();
let images: ImageTars;
let work: Workloads;

beforeAll(async () => {
  images = nodeImages();
  try {
    await node.start(images);
    work = new Workloads(node, imageRef(images, 'busybox'));
    const started = Date.now();
    node.kubectl([
      'apply',
      '--server-side',
      '-k',
      writeOverlay(path.join(node.run, 'overlay-dir'), images, NODE_TEMPORAL_ADDRESS),
    ]);
    await driverReady();
    node.timings['deploy/ applied -> controller and node Pods Ready'] = (Date.now() - started) / 1000;
  } catch (error) {
    const tails = node.ns ? node.logTails() : '';
    await node.stop();
    throw new Error(`${String(error)}\n${tails}`);
  }
}, 600_000);

afterAll(async () => {
  await node.stop();
  console.log(`real node figures (s):\n${JSON.stringify(node.timings, null, 2)}`);
}, 120_000);

async function driverReady(): Promise<void> {
  const apps = `/apis/apps/v1/namespaces/${NAMESPACE}`;
  try {
    await eventually(
      'controller Deployment (2 replicas) and node DaemonSet Ready',
      async () => {
        node.assertRunning();
        const deployment = await node.api.get<V1Deployment>(`${apps}/deployments/durable-csi-controller`);
        const daemonSet = await node.api.get<V1DaemonSet>(`${apps}/daemonsets/durable-csi-node`);
        return (
          deployment.status?.readyReplicas === 2 &&
          deployment.status.updatedReplicas === 2 &&
          (deployment.status.replicas ?? 0) === 2 &&
          daemonSet.status?.numberReady === 1 &&
          daemonSet.status.updatedNumberScheduled === 1
        );
      },
      240_000,
      1000,
    );
  } catch (error) {
    throw new Error(`${String(error)}\n${podsDescribed()}`);
  }
}

function podsDescribed(): string {
  try {
    return node.kubectl(['describe', 'pods', '-n', NAMESPACE]).slice(-6000);
  } catch (error) {
    return String(error);
  }
}

test('deploy/ runs as Pods: every container Ready, kubelet registered the plugin', async () => {
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
    expect(names).toEqual(['csi-provisioner', 'csi-resizer', 'durable-csi']);
  }
  const csiNode = await node.api.get<V1CSINode>(`/apis/storage.k8s.io/v1/csinodes/${NODE_NAME}`);
  expect(csiNode.spec.drivers.map((d) => [d.name, d.nodeID])).toEqual([[DRIVER, NODE_NAME]]);
});

test('a dir PVC mounted by a Pod: written and read, fsGroup applied; deleting the Pod unmounts it', async () => {
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

test('figures: PVC created -> Pod Running and PVC deleted -> PV gone, 30 dir Pods, 5 at a time', async () => {
  const running: number[] = [];
  const gone: number[] = [];
  const started = Date.now();
  const names = Array.from({ length: 30 }, (_, i) => `fig-${i}`);
  for (let i = 0; i < names.length; i += 5) {
    await Promise.all(
      names.slice(i, i + 5).map(async (name) => {
        const t0 = Date.now();
        await work.claim(name, 'durable-csi-dir');
        await work.pod(name, name, { script: `echo ${name} > /data/f` });
        await work.waitRunning(name);
        running.push(Date.now() - t0);
        await work.deletePod(name);
        const pv = (await work.getClaim(name)).spec?.volumeName ?? '';
        const t1 = Date.now();
        await work.deleteClaim(name);
        await work.waitGone(`/api/v1/persistentvolumes/${pv}`, `PV ${pv}`);
        gone.push(Date.now() - t1);
      }),
    );
  }
  const up = summarize(running, Date.now() - started);
  const down = summarize(gone, Date.now() - started);
  node.timings['dir: PVC created -> Pod Running p50'] = up.p50 / 1000;
  node.timings['dir: PVC created -> Pod Running p99'] = up.p99 / 1000;
  node.timings['dir: PVC deleted -> PV gone p50'] = down.p50 / 1000;
  node.timings['dir: PVC deleted -> PV gone p99'] = down.p99 / 1000;
  expect(running).toHaveLength(30);
  expect(fs.readdirSync(path.join(node.poolDir, 'volumes'))).toEqual([]);
  expect(node.ns.mountinfo()).not.toContain('kubernetes.io~csi');
}, 600_000);

test('teardown leaves nothing: no process, mount, loop device, interface or directory', async () => {
  await node.stop();
  expect(node.leftovers()).toEqual([]);
}, 120_000);
