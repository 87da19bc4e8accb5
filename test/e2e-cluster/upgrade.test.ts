import type { V1Pod, V1PodList } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import {
  CONTENTS,
  createSnapshot,
  readySnapshot,
  snapshotsPath,
  type VolumeSnapshot,
} from '../e2e-k8s/snapshot-objects';
import { writeOverlay } from '../e2e-node/deploy-overlay';
import { NAMESPACE, deployedCluster, driverReady } from '../e2e-node/deployed-node';
import { nodeImages, type ImageTars } from '../e2e-node/images';
import { CLUSTER_TEMPORAL_ADDRESS, type ClusterNode } from '../e2e-node/real-cluster';
import { UPGRADE_FROM, releaseBuild, type Release } from '../e2e-node/release';
import { RolloutWatch, type Watched } from '../e2e-node/rollout-watch';
import { APP_NAMESPACE } from '../e2e-node/workloads';
import { eventually } from '../support/eventually';

/**
 * The upgrade as an admin does it (deploy/README.md, kustomize): the release 0.2.0 installed on three real nodes
 * (its image built from the release commit, its manifests from that commit: release.ts), then the overlay pointed at
 * this checkout's deploy/ and image and applied again: the node DaemonSet rolls one node at a time and the
 * controller Deployment rolls, while claims and VolumeSnapshots are deleted and created on every node and writers
 * write; then the release's overlay applied again, the downgrade, under the same load. Issue 35 item 2. Run by
 * `npm run test:cluster`.
 */
jest.setTimeout(300_000);

const NODES = ['dcsi-u1', 'dcsi-u2', 'dcsi-u3'];
const FROM = UPGRADE_FROM;
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

const CLAIMS = `/api/v1/namespaces/${APP_NAMESPACE}/persistentvolumeclaims`;
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

/** One node's roll: when its old plugin Pod went (ms since the apply). */
type RolledAt = Map<string, number>;

/**
 * Applies `overlay` (as the admin's `kubectl apply -k`) and, as each node's old plugin Pod goes, runs `onRolled` for
 * that node (deletions that need the node's new plugin, creations made while the rest still roll); until every
 * driver Pod is updated and Ready. Audited throughout: the per-node RolloutWatch over `watched` (nothing goes while
 * its data is on that node's disk or while that node's plugin is down) and never two nodes without their plugin.
 */
async function roll(
  label: string,
  overlay: string,
  watched: Watched[],
  onRolled: (node: ClusterNode) => Promise<void>,
): Promise<{ watch: RolloutWatch; rolledAt: RolledAt; started: number }> {
  const { node: cluster, work } = real;
  const oldPlugins = new Map((await podsOf('node')).map((pod) => [pod.spec?.nodeName ?? '', pod.metadata?.uid]));
  const oldControllers = (await podsOf('controller')).map((pod) => pod.metadata?.name);
  const deletion: { at?: number } = {};
  const watch = new RolloutWatch(
    cluster,
    watched,
    () => deletion.at,
    (name) => (name === undefined ? cluster.nodes.some((n) => n.pluginRunning()) : cluster.node(name).pluginRunning()),
  );
  let mostDown = 0;
  const sampler = setInterval(() => {
    mostDown = Math.max(mostDown, cluster.nodes.filter((node) => !node.pluginRunning()).length);
  }, 200);
  watch.start();
  const started = Date.now();
  cluster.kubectl(['apply', '--server-side', '-k', overlay]);
  deletion.at = Date.now();
  const rolledAt: RolledAt = new Map();
  try {
    // Not `eventually`: a failed deletion or creation must fail the test, not be tried again.
    const until = Date.now() + 300_000;
    while (rolledAt.size < NODES.length) {
      if (Date.now() > until) throw new Error(`${label}: node plugin Pods replaced only on ${[...rolledAt.keys()]}`);
      cluster.assertRunning();
      const now = new Set((await podsOf('node')).map((pod) => pod.metadata?.uid));
      for (const node of cluster.nodes) {
        if (rolledAt.has(node.name) || now.has(oldPlugins.get(node.name))) continue;
        rolledAt.set(node.name, Date.now() - started);
        await onRolled(node);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await driverReady(cluster, 300_000);
    cluster.timings[`${label}: apply -> every node plugin and controller updated and Ready`] =
      (Date.now() - started) / 1000;
    [...rolledAt.entries()]
      .sort(([, a], [, b]) => a - b)
      .forEach(([name, at], i) => {
        cluster.timings[`${label}: node ${i + 1} (${name}) old plugin gone, s after apply`] = at / 1000;
      });
    for (const { pv, path: objectPath } of watched)
      await work.waitGone(objectPath ?? `/api/v1/persistentvolumes/${pv}`, pv, 180_000);
    cluster.timings[`${label}: PVC or VolumeSnapshot deleted as its node rolled -> PV or content gone, max`] =
      Math.max(...watch.waits()) / 1000;
  } finally {
    clearInterval(sampler);
    await watch.stop();
  }
  expect(watch.violations).toEqual([]);
  expect([label, mostDown <= 1]).toEqual([label, true]);
  for (const { dir } of watched) expect(fs.existsSync(dir)).toBe(false);
  await eventually(
    `${label}: old controller Pods gone`,
    async () => !(await podsOf('controller')).some((pod) => oldControllers.includes(pod.metadata?.name)),
    120_000,
    500,
  );
  return { watch, rolledAt, started };
}

/** A VolumeSnapshot of `claim` (its volume on `node`), once ready: its copy on that node's disk and no other's. */
async function snapshot(node: ClusterNode, name: string, claim: string): Promise<Watched> {
  const { node: cluster } = real;
  await createSnapshot(cluster.api, APP_NAMESPACE, name, claim);
  return readyCopy(node, name);
}

async function readyCopy(node: ClusterNode, name: string): Promise<Watched> {
  const { node: cluster } = real;
  const { content } = await readySnapshot(cluster.api, APP_NAMESPACE, name);
  const contentName = content.metadata?.name ?? '';
  const key = keyOf(content.status?.snapshotHandle);
  const copyOf = (n: ClusterNode) => path.join(n.poolDir, 'snapshots', 'data', key);
  for (const other of cluster.nodes)
    expect([name, other.name, fs.existsSync(copyOf(other))]).toEqual([name, other.name, other === node]);
  return {
    pv: `VolumeSnapshotContent ${contentName}`,
    dir: copyOf(node),
    path: `${CONTENTS}/${contentName}`,
    node: node.name,
  };
}

/** A claim whose Pod wrote and went: its PV and its volume's directory on `node`. */
async function volumeWatched(node: ClusterNode, claim: string): Promise<Watched> {
  const pv = await real.work.volumeOf(claim);
  const dir = path.join(node.poolDir, 'volumes', keyOf(pv.spec?.csi?.volumeHandle));
  expect([claim, fs.existsSync(dir)]).toEqual([claim, true]);
  return { pv: pv.metadata?.name ?? '', dir, node: node.name };
}

const deleteClaim = (name: string) => real.node.api.delete(`${CLAIMS}/${name}`);
const deleteSnapshot = (name: string) => real.node.api.delete(`${snapshotsPath(APP_NAMESPACE)}/${name}`);

test(`upgrade ${FROM} -> this build, then downgrade -> ${FROM}, one node at a time, while claims and VolumeSnapshots go and come on every node: deletions wait for their node, writers never pause`, async () => {
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

  // Made by 0.2.0: per node two claims whose Pods went (deleted during the upgrade), and two VolumeSnapshots of the
  // writer's volume: one deleted during the upgrade, the other restored from by this build, then deleted during the
  // downgrade.
  const upgradeWatched: Watched[] = [];
  const releaseSnapshots = new Map<string, Watched>();
  for (const node of cluster.nodes) {
    for (const name of olds(node)) {
      await work.deletePod(name);
      upgradeWatched.push(await volumeWatched(node, name));
    }
    upgradeWatched.push(await snapshot(node, `s020-up-${node.name}`, `writer-${node.name}`));
    releaseSnapshots.set(node.name, await snapshot(node, `s020-down-${node.name}`, `writer-${node.name}`));
  }
  const writersSince = Date.now();

  // The upgrade: as each node rolls, its 0.2.0 claims and first snapshot are deleted (their deletion needs the
  // node's new plugin), a new claim with a Pod and a new snapshot made there.
  const current = writeOverlay(path.join(cluster.run, 'overlay-current'), nodeImages('node'), CLUSTER_TEMPORAL_ADDRESS);
  await roll('upgrade', current, upgradeWatched, async (node) => {
    for (const name of olds(node)) await deleteClaim(name);
    await deleteSnapshot(`s020-up-${node.name}`);
    await work.claim(`new-${node.name}`, 'durable-csi-dir');
    await work.pod(`new-${node.name}`, `new-${node.name}`, {
      node: node.name,
      script: `echo new-${node.name} > /data/f`,
    });
    await createSnapshot(cluster.api, APP_NAMESPACE, `snew-${node.name}`, `writer-${node.name}`);
  });
  for (const pod of [...(await podsOf('node')), ...(await podsOf('controller'))])
    expect(driverImageOf(pod)).not.toBe(release.ref);

  // This build reads what 0.2.0 made: each node's kept 0.2.0 snapshot restored (on its node) holds the start of its
  // writer's log.
  const downgradeWatched: Watched[] = [];
  for (const node of cluster.nodes) {
    const restored = `restored-${node.name}`;
    await work.claim(restored, 'durable-csi-dir', '64Mi', false, {
      apiGroup: 'snapshot.storage.k8s.io',
      kind: 'VolumeSnapshot',
      name: `s020-down-${node.name}`,
    });
    await work.pod(restored, restored, { node: node.name });
  }
  for (const node of cluster.nodes) {
    const restored = `restored-${node.name}`;
    await work.waitRunning(`new-${node.name}`, 180_000);
    expect(work.exec(`new-${node.name}`, 'cat /data/f')).toBe(`new-${node.name}\n`);
    await work.waitRunning(restored, 180_000);
    const copy = work.exec(restored, 'cat /data/log');
    expect(copy.length).toBeGreaterThan(0);
    expect(work.exec(`writer-${node.name}`, 'cat /data/log').startsWith(copy)).toBe(true);
    for (const name of [`new-${node.name}`, restored]) {
      await work.deletePod(name);
      downgradeWatched.push(await volumeWatched(node, name));
    }
    downgradeWatched.push(await readyCopy(node, `snew-${node.name}`));
    downgradeWatched.push(releaseSnapshots.get(node.name) as Watched);
  }

  // The downgrade, the same way: what this build and 0.2.0 made is deleted as each node goes back to 0.2.0.
  const back = path.join(cluster.run, 'overlay-release');
  await roll(`downgrade`, back, downgradeWatched, async (node) => {
    for (const name of [`new-${node.name}`, `restored-${node.name}`]) await deleteClaim(name);
    for (const name of [`snew-${node.name}`, `s020-down-${node.name}`]) await deleteSnapshot(name);
    await work.claim(`down-${node.name}`, 'durable-csi-dir');
    await work.pod(`down-${node.name}`, `down-${node.name}`, {
      node: node.name,
      script: `echo down-${node.name} > /data/f`,
    });
    await createSnapshot(cluster.api, APP_NAMESPACE, `sdown-${node.name}`, `writer-${node.name}`);
  });
  for (const pod of [...(await podsOf('node')), ...(await podsOf('controller'))])
    expect(driverImageOf(pod)).toBe(release.ref);
  const lastWatched: Watched[] = [];
  for (const node of cluster.nodes) {
    await work.waitRunning(`down-${node.name}`, 180_000);
    expect(work.exec(`down-${node.name}`, 'cat /data/f')).toBe(`down-${node.name}\n`);
    lastWatched.push(await readyCopy(node, `sdown-${node.name}`));
  }

  // Every writer wrote on through both rolls of its node: every line, in order, no pause over 3 s, the same in the
  // pool.
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
    expect(times[0]).toBeLessThanOrEqual(writersSince / 1000);
    expect(Date.now() / 1000 - (times.at(-1) ?? 0)).toBeLessThan(5);
    const pv = await work.volumeOf(name);
    const dir = path.join(node.poolDir, 'volumes', keyOf(pv.spec?.csi?.volumeHandle));
    expect(fs.readFileSync(path.join(dir, 'log'), 'utf8').startsWith(log)).toBe(true);
  }

  // 0.2.0 deletes the snapshots it made after the downgrade: content and copy go together.
  for (const node of cluster.nodes) await deleteSnapshot(`sdown-${node.name}`);
  for (const { pv, path: objectPath, dir } of lastWatched) {
    await work.waitGone(objectPath ?? '', pv, 180_000);
    expect(fs.existsSync(dir)).toBe(false);
  }
}, 1_500_000);

test('nothing left on any node: no volume in any pool, no CSI mount, and after stop nothing on the host', async () => {
  const { node: cluster, work } = real;
  // What a failed scenario left: its VolumeSnapshots (cleanUp deletes Pods and claims only), then their contents.
  const left = await cluster.api.get<{ items: VolumeSnapshot[] }>(snapshotsPath(APP_NAMESPACE));
  for (const item of left.items) await deleteSnapshot(item.metadata?.name ?? '');
  await eventually(
    'every VolumeSnapshotContent gone',
    async () => (await cluster.api.get<{ items: unknown[] }>(CONTENTS)).items.length === 0,
    180_000,
  );
  await work.cleanUp();
  for (const node of cluster.nodes)
    await eventually(
      `${node.name}: pool empty, no CSI mount`,
      async () =>
        fs.readdirSync(path.join(node.poolDir, 'volumes')).length === 0 &&
        fs.readdirSync(path.join(node.poolDir, 'snapshots', 'data')).length === 0 &&
        !node.mountinfo().includes('kubernetes.io~csi'),
      60_000,
    );
  await cluster.stop();
  expect(cluster.leftovers()).toEqual([]);
}, 300_000);
