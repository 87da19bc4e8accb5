import type { CoreV1EventList, V1PersistentVolume, V1PodList } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import { KubeError } from '../e2e-k8s/kube-rest';
import { DRIVER, NAMESPACE, deployedCluster } from '../e2e-node/deployed-node';
import type { ClusterNode } from '../e2e-node/real-cluster';
import { RolloutWatch, type Watched } from '../e2e-node/rollout-watch';
import { APP_NAMESPACE } from '../e2e-node/workloads';
import { eventually } from '../support/eventually';

/**
 * Three real nodes (test/e2e-node/real-cluster.ts): one control plane, three kubelets, each node in namespaces of its
 * own with its own containerd, Pod network, cgroups and pool; deploy/ (the current build) on all of them. Issue 35,
 * items 1 and 4 ("a node lost"). Run by `npm run test:cluster`; docs/kubernetes.md, "Several real nodes".
 */
jest.setTimeout(300_000);

const NODES = ['dcsi-c1', 'dcsi-c2', 'dcsi-c3'];
/** Seconds without a heartbeat before a Node is NotReady: low, so that a lost node shows within the test. */
const NOT_READY_AFTER = 16;
const real = deployedCluster({ nodes: NODES, notReadyAfterSeconds: NOT_READY_AFTER });
const keyOf = (pv: V1PersistentVolume) => (pv.spec?.csi?.volumeHandle ?? '').split('_').pop() ?? '';
const volumeDir = (node: ClusterNode, pv: V1PersistentVolume) => path.join(node.poolDir, 'volumes', keyOf(pv));

/** The node a PV's volume lives on, from its node affinity (the driver's topology key). */
function nodeOfVolume(pv: V1PersistentVolume): string | undefined {
  const terms = pv.spec?.nodeAffinity?.required?.nodeSelectorTerms ?? [];
  return terms.flatMap((term) => term.matchExpressions ?? []).flatMap((e) => e.values ?? [])[0];
}

async function pvExists(name: string): Promise<boolean> {
  try {
    await real.node.api.get(`/api/v1/persistentvolumes/${name}`);
    return true;
  } catch (error) {
    if (error instanceof KubeError && error.status === 404) return false;
    throw error;
  }
}

test('the cluster: three Nodes Ready, a node plugin on each, each node its own Pod network and pool', async () => {
  const cluster = real.node;
  const pods = await cluster.api.get<V1PodList>(
    `/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dnode`,
  );
  expect(pods.items.map((pod) => pod.spec?.nodeName).sort()).toEqual(NODES);
  const podNets = new Set(pods.items.map((pod) => (pod.status?.podIP ?? '').split('.').slice(0, 3).join('.')));
  expect(podNets.size).toBe(NODES.length);
  for (const node of cluster.nodes) {
    expect(await node.ready()).toBe(true);
    expect(node.pluginRunning()).toBe(true);
  }
  const pools = cluster.nodes.map((node) => fs.realpathSync(node.poolDir));
  expect(new Set(pools).size).toBe(NODES.length);
});

test('a claim and a writer Pod on every node: each volume on its own node, a node lost keeps its deleted volume until it returns', async () => {
  const { node: cluster, work } = real;
  // WaitForFirstConsumer: each claim gets its volume on the node its Pod was placed on.
  for (const node of cluster.nodes) {
    await work.claim(`c-${node.name}`, 'durable-csi-dir');
    await work.pod(`w-${node.name}`, `c-${node.name}`, {
      node: node.name,
      script: `echo ${node.name} > /data/written-on`,
    });
  }
  const volumes = new Map<string, V1PersistentVolume>();
  for (const node of cluster.nodes) {
    await work.waitRunning(`w-${node.name}`);
    // exec goes from the control plane's namespace to that node's kubelet: the nodes' network works.
    expect(work.exec(`w-${node.name}`, 'cat /data/written-on')).toBe(`${node.name}\n`);
    const pv = await work.volumeOf(`c-${node.name}`);
    expect(pv.spec?.csi?.driver).toBe(DRIVER);
    expect(nodeOfVolume(pv)).toBe(node.name);
    volumes.set(node.name, pv);
    for (const other of cluster.nodes)
      expect([other.name, fs.existsSync(volumeDir(other, pv))]).toEqual([other.name, other === node]);
    expect(node.mountinfo()).toContain(pv.metadata?.name ?? 'no PV');
  }

  // The node lost: one without a controller replica (the other's sidecars keep their leader), and a second node
  // whose claim is deleted at the same time, as a control.
  const controllers = await cluster.api.get<V1PodList>(
    `/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dcontroller`,
  );
  const withController = new Set(controllers.items.map((pod) => pod.spec?.nodeName));
  const lost = cluster.nodes.find((node) => !withController.has(node.name)) ?? (cluster.nodes[2] as ClusterNode);
  const control = cluster.nodes.find((node) => node !== lost) as ClusterNode;
  const lostPv = volumes.get(lost.name) as V1PersistentVolume;
  const controlPv = volumes.get(control.name) as V1PersistentVolume;
  for (const node of [lost, control]) await work.deletePod(`w-${node.name}`);
  expect(lost.mountinfo()).not.toContain(lostPv.metadata?.name ?? 'no PV');

  const watched: Watched[] = [
    { pv: lostPv.metadata?.name ?? '', dir: volumeDir(lost, lostPv), node: lost.name },
    { pv: controlPv.metadata?.name ?? '', dir: volumeDir(control, controlPv), node: control.name },
  ];
  const deletion: { at?: number } = {};
  const watch = new RolloutWatch(
    cluster,
    watched,
    () => deletion.at,
    (name) => (name === undefined ? cluster.nodes.some((n) => n.pluginRunning()) : cluster.node(name).pluginRunning()),
  );
  watch.start();
  try {
    const halted = Date.now();
    await lost.halt();
    expect(lost.pluginRunning()).toBe(false);
    await eventually(`${lost.name} NotReady`, async () => (await lost.ready()) === false, 120_000, 500);
    cluster.timings['node halted -> Node NotReady'] = (Date.now() - halted) / 1000;

    deletion.at = Date.now();
    for (const node of [lost, control]) await work.deleteClaim(`c-${node.name}`);
    // The other node deletes at once.
    await eventually(`PV of ${control.name} gone`, async () => !(await pvExists(watched[1]?.pv ?? '')), 120_000, 200);
    expect(fs.existsSync(watched[1]?.dir ?? '')).toBe(false);
    // The lost node's deletion is tried and refused (its node plugin cannot do it), and the PV stays.
    await eventually(
      `a VolumeFailedDelete event on ${watched[0]?.pv}`,
      async () => {
        const events = await cluster.api.get<CoreV1EventList>(
          `/api/v1/namespaces/${APP_NAMESPACE}/events?fieldSelector=involvedObject.name%3D${watched[0]?.pv}`,
        );
        return events.items.some((event) => event.reason === 'VolumeFailedDelete');
      },
      120_000,
      500,
    );
    // Held down for a while more (csi-provisioner retries meanwhile): nothing may give.
    const until = deletion.at + 30_000;
    while (Date.now() < until) {
      expect(await pvExists(watched[0]?.pv ?? '')).toBe(true);
      expect(fs.existsSync(watched[0]?.dir ?? '')).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    expect(watch.violations).toEqual([]);

    const back = Date.now();
    await lost.resume();
    cluster.timings['node resumed -> Node Ready'] = (Date.now() - back) / 1000;
    // csi-provisioner's next retry (its backoff is capped at 30 s) finds the node plugin back.
    await eventually(`PV of ${lost.name} gone`, async () => !(await pvExists(watched[0]?.pv ?? '')), 180_000, 200);
    cluster.timings['node Ready -> its deleted PV gone'] = (Date.now() - back) / 1000;
    expect(fs.existsSync(watched[0]?.dir ?? '')).toBe(false);
  } finally {
    await watch.stop();
  }
  expect(watch.violations).toEqual([]);
  // The third node's claim and Pod were untouched all along.
  const third = cluster.nodes.find((node) => node !== lost && node !== control) as ClusterNode;
  expect(work.exec(`w-${third.name}`, 'cat /data/written-on')).toBe(`${third.name}\n`);
}, 600_000);

test('nothing left on any node: no volume in any pool, no CSI mount, and after stop nothing on the host', async () => {
  const { node: cluster, work } = real;
  await work.cleanUp();
  for (const node of cluster.nodes) {
    await eventually(
      `${node.name}: pool empty, no CSI mount`,
      async () =>
        fs.readdirSync(path.join(node.poolDir, 'volumes')).length === 0 &&
        !node.mountinfo().includes('kubernetes.io~csi'),
      60_000,
    );
  }
  console.log(
    `cluster of ${NODES.length}: memory ${Math.round(cluster.memoryBytes() / 2 ** 20)} MiB with the driver ` +
      `and no workload`,
  );
  await cluster.stop();
  expect(cluster.leftovers()).toEqual([]);
}, 300_000);
