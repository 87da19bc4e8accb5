import type { V1Pod, V1PodList } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import { writeOverlay } from '../e2e-node/deploy-overlay';
import { NAMESPACE, deployedCluster, driverReady } from '../e2e-node/deployed-node';
import { nodeImages, type ImageTars } from '../e2e-node/images';
import { CLUSTER_TEMPORAL_ADDRESS, type ClusterNode } from '../e2e-node/real-cluster';
import { releaseBuild, type Release } from '../e2e-node/release';
import { RolloutWatch, type Watched } from '../e2e-node/rollout-watch';
import { eventually } from '../support/eventually';

/**
 * The upgrade as an admin does it (deploy/README.md, kustomize): the release 0.2.0 installed on three real nodes
 * (its image built from the release commit, its manifests from that commit: release.ts), then the overlay pointed at
 * this checkout's deploy/ and image and applied again: the node DaemonSet rolls one node at a time and the
 * controller Deployment rolls, while claims are deleted and created on every node and writers write. Issue 35 item 2
 * (the downgrade not yet). Run by `npm run test:cluster`.
 */
jest.setTimeout(300_000);

const NODES = ['dcsi-u1', 'dcsi-u2', 'dcsi-u3'];
const FROM = 'v0.2.0';
let release: Release;
/** The current build's images but the driver: the release's. */
const releaseImages = (images: ImageTars): ImageTars => ({
  ...Object.fromEntries(Object.entries(images).filter(([ref]) => !/\/durable-csi:[^/]+$/.test(ref))),
  [release.ref]: release.tar,
});

const real = deployedCluster(
  { nodes: NODES },
  {
    extraImages: () => {
      release = releaseBuild(FROM);
      return { [release.ref]: release.tar };
    },
    install: async (cluster, images) => {
      const overlay = writeOverlay(
        path.join(cluster.run, 'overlay-release'),
        releaseImages(images),
        CLUSTER_TEMPORAL_ADDRESS,
        [],
        release.deployDir,
      );
      cluster.kubectl(['apply', '--server-side', '-k', overlay]);
    },
  },
);

const keyOf = (handle: string | undefined) => (handle ?? '').split('_').pop() ?? '';

async function podsOf(component: string): Promise<V1Pod[]> {
  const selector = encodeURIComponent(`app.kubernetes.io/component=${component}`);
  return (await real.node.api.get<V1PodList>(`/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=${selector}`)).items;
}

const driverImageOf = (pod: V1Pod) => pod.spec?.containers.find((c) => c.name === 'durable-csi')?.image ?? '';

test(`${FROM} installed: every node plugin and both controller replicas run the release's image`, async () => {
  const pods = [...(await podsOf('node')), ...(await podsOf('controller'))];
  expect(pods).toHaveLength(NODES.length + 2);
  for (const pod of pods) expect(driverImageOf(pod)).toBe(release.ref);
});

test(`upgrade ${FROM} -> this build, one node at a time, while claims go and come on every node: deletions wait for their node, writers never pause`, async () => {
  const { node: cluster, work } = real;
  const loop =
    'i=0; while true; do echo "$(date +%s) $i" >> /data/log && tail -n 1 /data/log >/dev/null; i=$((i+1)); sleep 0.2; done';
  const olds = (node: ClusterNode) => [0, 1].map((i) => `old-${i}-${node.name}`);
  for (const node of cluster.nodes) {
    await work.claim(`writer-${node.name}`, 'durable-csi-dir');
    await work.pod(`writer-${node.name}`, `writer-${node.name}`, { node: node.name, script: `{ (${loop}) & }` });
    for (const name of olds(node)) {
      await work.claim(name, 'durable-csi-dir');
      await work.pod(name, name, { node: node.name, script: `echo ${name} > /data/f` });
    }
  }
  for (const node of cluster.nodes)
    for (const name of [`writer-${node.name}`, ...olds(node)]) await work.waitRunning(name, 180_000);
  const watched: Watched[] = [];
  for (const node of cluster.nodes)
    for (const name of olds(node)) {
      await work.deletePod(name);
      const pv = await work.volumeOf(name);
      const dir = path.join(node.poolDir, 'volumes', keyOf(pv.spec?.csi?.volumeHandle));
      expect(fs.existsSync(dir)).toBe(true);
      watched.push({ pv: pv.metadata?.name ?? '', dir, node: node.name });
    }
  const oldPlugins = new Map((await podsOf('node')).map((pod) => [pod.spec?.nodeName ?? '', pod.metadata?.uid]));
  const oldControllers = (await podsOf('controller')).map((pod) => pod.metadata?.name);
  const deletion: { at?: number } = {};
  const watch = new RolloutWatch(
    cluster,
    watched,
    () => deletion.at,
    (name) => (name === undefined ? cluster.nodes.some((n) => n.pluginRunning()) : cluster.node(name).pluginRunning()),
  );
  // One node at a time: never two nodes without their node plugin.
  let mostDown = 0;
  const sampler = setInterval(() => {
    mostDown = Math.max(mostDown, cluster.nodes.filter((node) => !node.pluginRunning()).length);
  }, 200);
  watch.start();
  const started = Date.now();
  const current = writeOverlay(path.join(cluster.run, 'overlay-current'), nodeImages('node'), CLUSTER_TEMPORAL_ADDRESS);
  cluster.kubectl(['apply', '--server-side', '-k', current]);
  // As each node's old plugin Pod goes, that node's old claims are deleted (their deletion needs the node's new
  // plugin) and a new claim with a Pod made there.
  const replacedAt = new Map<string, number>();
  const news: string[] = [];
  deletion.at = Date.now();
  try {
    // Not `eventually`: a failed deletion or creation must fail the test, not be tried again.
    const until = Date.now() + 300_000;
    while (replacedAt.size < NODES.length) {
      if (Date.now() > until) throw new Error(`node plugin Pods replaced only on ${[...replacedAt.keys()].join(', ')}`);
      cluster.assertRunning();
      const now = new Set((await podsOf('node')).map((pod) => pod.metadata?.uid));
      for (const node of cluster.nodes) {
        if (replacedAt.has(node.name) || now.has(oldPlugins.get(node.name))) continue;
        replacedAt.set(node.name, Date.now());
        for (const name of olds(node))
          await cluster.api.delete(`/api/v1/namespaces/default/persistentvolumeclaims/${name}`);
        const name = `new-${node.name}`;
        await work.claim(name, 'durable-csi-dir');
        await work.pod(name, name, { node: node.name, script: `echo ${name} > /data/f` });
        news.push(name);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await driverReady(cluster, 300_000);
    cluster.timings['upgrade: apply -> every node plugin and controller updated and Ready'] =
      (Date.now() - started) / 1000;
    const order = [...replacedAt.entries()].sort(([, a], [, b]) => a - b);
    order.forEach(([name, at], i) => {
      cluster.timings[`upgrade: node ${i + 1} (${name}) old plugin gone, s after apply`] = (at - started) / 1000;
    });
    for (const name of news) {
      await work.waitRunning(name, 180_000);
      expect(work.exec(name, 'cat /data/f')).toBe(`${name}\n`);
    }
    for (const { pv } of watched) await work.waitGone(`/api/v1/persistentvolumes/${pv}`, pv, 180_000);
    cluster.timings['upgrade: claim deleted while its node rolled -> PV gone, max'] = Math.max(...watch.waits()) / 1000;
  } finally {
    clearInterval(sampler);
    await watch.stop();
  }
  expect(watch.violations).toEqual([]);
  expect(mostDown).toBeLessThanOrEqual(1);
  for (const { dir } of watched) expect(fs.existsSync(dir)).toBe(false);
  await eventually(
    'old controller Pods gone',
    async () => !(await podsOf('controller')).some((pod) => oldControllers.includes(pod.metadata?.name)),
    120_000,
    500,
  );
  const now = [...(await podsOf('node')), ...(await podsOf('controller'))];
  for (const pod of now) expect(driverImageOf(pod)).not.toBe(release.ref);

  // Every writer wrote on through its node's roll: every line, in order, no pause over 3 s, the same in the pool.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  for (const node of cluster.nodes) {
    const name = `writer-${node.name}`;
    const log = work.exec(name, 'cat /data/log');
    const lines = log
      .trim()
      .split('\n')
      .map((line) => line.split(' ').map(Number));
    expect(lines.map(([, i]) => i)).toEqual(lines.map((_, i) => i));
    const times = lines.map(([t]) => t ?? 0);
    expect([name, Math.max(...times.slice(1).map((t, i) => t - (times[i] ?? t))) <= 3]).toEqual([name, true]);
    expect(times[0]).toBeLessThanOrEqual(started / 1000);
    expect(Date.now() / 1000 - (times.at(-1) ?? 0)).toBeLessThan(5);
    const pv = await work.volumeOf(name);
    const dir = path.join(node.poolDir, 'volumes', keyOf(pv.spec?.csi?.volumeHandle));
    expect(fs.readFileSync(path.join(dir, 'log'), 'utf8').startsWith(log)).toBe(true);
  }
}, 900_000);

test('nothing left on any node: no volume in any pool, no CSI mount, and after stop nothing on the host', async () => {
  const { node: cluster, work } = real;
  await work.cleanUp();
  for (const node of cluster.nodes)
    await eventually(
      `${node.name}: pool empty, no CSI mount`,
      async () =>
        fs.readdirSync(path.join(node.poolDir, 'volumes')).length === 0 &&
        !node.mountinfo().includes('kubernetes.io~csi'),
      60_000,
    );
  await cluster.stop();
  expect(cluster.leftovers()).toEqual([]);
}, 300_000);
