import type { V1PersistentVolume, V1PersistentVolumeList, V1PodList } from '@kubernetes/client-node';
import { Client } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { NodeIdKey, PhaseKey, moveWorkflowId, parseSnapshotId, parseVolumeId } from '../../common/names';
import { CONTENTS, createSnapshot, readySnapshot, snapshotsPath } from '../e2e-k8s/snapshot-objects';
import { DRIVER, deployedCluster } from '../e2e-node/deployed-node';
import { imageRef } from '../e2e-node/images';
import type { RealCluster } from '../e2e-node/real-cluster';
import { APP_NAMESPACE, nodeOfVolume } from '../e2e-node/workloads';
import { eventually } from '../support/eventually';
import { connectTestTemporal } from '../support/test-temporal';

/**
 * Issue 39's scenario on three real nodes: a StatefulSet's Pods write data on node A; A is drained (cordoned, its
 * Pods evicted: they wait, unschedulable, for their claims) and `durable-csi nodes evacuate A` moves each volume to
 * B or C, one at a time, while the test kills the target's agent as one move copies, the source's agent as another
 * does, and every controller as the third switches its claim. Every Pod then runs on B or C and reads what it wrote
 * (checksums); nothing is left on A; and a watch of the PVs all along holds the promises: no PV names a volume that
 * is not on its node, and each claim always has a copy a PV names. A VolumeSnapshot of the first claim moves with
 * them, and a claim restored from it on its new node reads the same data. Then the same with 20 claims, 4 moves at a time
 * and no kills, for the figure of a whole node's evacuation with the claims switched. Run by `npm run test:cluster`
 * (docs/volume-moves.md).
 */
jest.setTimeout(900_000);

const NODES = ['dcsi-m1', 'dcsi-m2', 'dcsi-m3'];
const [A, B, C] = NODES as [string, string, string];
const CLASS = 'durable-csi-loop-ext4';

/** One evacuation: a StatefulSet of `replicas` on A, each Pod writing `dataMiB` of random data to its claim. */
interface Scenario {
  set: string;
  replicas: number;
  claimSize: string;
  dataMiB: number;
  /** `nodes evacuate --parallel`. */
  parallel: number;
  /** Made in order, one per move, each when some move shows one of its phases; every one must happen. */
  kills: Kill[];
  /** A VolumeSnapshot of the set's first claim, taken before the drain: it moves with the volumes. */
  snapshot?: boolean;
}

const claimsOf = ({ set, replicas }: Scenario) => Array.from({ length: replicas }, (_, i) => `data-${set}-${i}`);
const podsOf = ({ set, replicas }: Scenario) => Array.from({ length: replicas }, (_, i) => `${set}-${i}`);
const real = deployedCluster(
  { nodes: NODES, poolFilesystem: 'xfs-reflink', runPrefix: 'dcsi-move-' },
  { components: ['loop-backend'] },
);
const APPS = `/apis/apps/v1/namespaces/${APP_NAMESPACE}/statefulsets`;

/** The image of a volume: its directory in its node's pool, as the host sees it. */
function imageOf(cluster: RealCluster, volumeId: string): string | undefined {
  const parts = parseVolumeId(volumeId);
  if (!parts) return undefined;
  return path.join(cluster.node(parts.nodeId).poolDir, 'volumes', parts.key, 'disk.img');
}

function driverPvs(list: V1PersistentVolumeList): V1PersistentVolume[] {
  return list.items.filter((pv) => pv.spec?.csi?.driver === DRIVER);
}

/**
 * Every 200 ms until stopped: each PV of the driver names a volume whose image is on its node (a PV seen naming a
 * missing image is read again: still there, it is a PV pointing at a volume that is gone), and each claim has a copy
 * some PV bound to it names. Returns what it saw wrong.
 */
function watchPromises(cluster: RealCluster, claims: string[]): { stop(): Promise<string[]> } {
  const wrong: string[] = [];
  return sampling('the watch', wrong, async () => {
    const pvs = driverPvs(await cluster.api.get<V1PersistentVolumeList>('/api/v1/persistentvolumes'));
    for (const pv of pvs) {
      const image = imageOf(cluster, pv.spec?.csi?.volumeHandle ?? '');
      if (pv.metadata?.deletionTimestamp || (image && fs.existsSync(image))) continue;
      const again = await cluster.api
        .get<V1PersistentVolume>(`/api/v1/persistentvolumes/${pv.metadata?.name}`)
        .catch(() => undefined);
      if (again?.metadata?.uid === pv.metadata?.uid && !again?.metadata?.deletionTimestamp)
        wrong.push(`PV ${pv.metadata?.name} names ${pv.spec?.csi?.volumeHandle}, which is not on its node`);
    }
    for (const claim of claims) {
      const copies = pvs.filter((pv) => pv.spec?.claimRef?.name === claim);
      if (!copies.some((pv) => fs.existsSync(imageOf(cluster, pv.spec?.csi?.volumeHandle ?? '') ?? '')))
        wrong.push(`no copy of claim ${claim}: its PVs ${copies.map((pv) => pv.metadata?.name).join(', ') || 'none'}`);
    }
    return false;
  });
}

/**
 * `sample` every 200 ms until stopped or until it answers true; stop() waits for the sample under way and returns
 * `found`, with the loop's own failure among it (`what` failed: ...). `close` runs once the loop ends.
 */
function sampling(
  what: string,
  found: string[],
  sample: () => Promise<boolean>,
  close?: () => Promise<void>,
): { stop(): Promise<string[]> } {
  let stopped = false;
  const loop = (async () => {
    try {
      while (!stopped && !(await sample())) await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      await close?.();
    }
  })().catch((error: unknown) => {
    found.push(`${what} failed: ${String(error)}`);
  });
  return {
    async stop() {
      stopped = true;
      await loop;
      return found;
    },
  };
}

/** A kill the test makes once some move shows one of `phases`: which processes, on which node. */
interface Kill {
  what: string;
  phases: string[];
  kill(cluster: RealCluster, nodeOfPhase: string): number;
}

const KILLS: Kill[] = [
  {
    what: "the target's agent",
    phases: ['pulling', 'adopting'],
    kill: (cluster, node) => cluster.node(node).killAgents('node'),
  },
  {
    what: "the source's agent",
    phases: ['snapshotting', 'offering', 'pulling'],
    kill: (cluster) => cluster.node(A).killAgents('node'),
  },
  {
    what: 'every controller',
    phases: ['switching'],
    kill: (cluster) => cluster.nodes.reduce((sum, node) => sum + node.killAgents('controller'), 0),
  },
];

/**
 * Every 200 ms until stopped: the moves' phases (their workflows' search attributes); the next of `kills` made
 * on a move that none made one on yet, in one of its phases. Returns what was killed, where, in which phase.
 */
function killDuringMoves(cluster: RealCluster, volumeIds: string[], kills: Kill[]): { stop(): Promise<string[]> } {
  const done: string[] = [];
  const killedOn = new Set<string>();
  const connecting = connectTestTemporal();
  const client = connecting.then((connection) => new Client({ connection, namespace: 'default' }));
  client.catch(() => undefined); // a failed connect is reported by the sample that awaits it
  const sample = async () => {
    for (const volumeId of volumeIds) {
      const next = kills[done.length];
      if (!next) return true;
      if (killedOn.has(volumeId)) continue;
      const description = await (
        await client
      ).workflow
        .getHandle(moveWorkflowId(DRIVER, volumeId))
        .describe()
        .catch(() => undefined);
      if (description?.status.name !== 'RUNNING') continue;
      const phase = description.typedSearchAttributes.get(PhaseKey) ?? '';
      const node = description.typedSearchAttributes.get(NodeIdKey) ?? '';
      if (!next.phases.includes(phase)) continue;
      const killed = next.kill(cluster, node);
      if (killed === 0) continue;
      killedOn.add(volumeId);
      done.push(`${next.what} (${killed} process(es)) in the ${phase} of ${volumeId}'s move`);
    }
    return done.length >= kills.length;
  };
  return sampling('the killer', done, sample, async () => (await connecting).close());
}

test("nodes evacuate moves a drained node's StatefulSet volumes to the others, its agents and controllers killed on the way: every Pod runs again on B or C with its data", async () => {
  const scenario = {
    set: 'db',
    replicas: 3,
    claimSize: '256Mi',
    dataMiB: 64,
    parallel: 1,
    kills: KILLS,
    snapshot: true,
  };
  const seconds = await evacuation(scenario);
  real.node.timings['evacuate: 3 volumes of 256 MiB (64 MiB written), one at a time, 3 kills'] = seconds;
});

test('figures: 20 claims evacuated 4 at a time, switched in Kubernetes', async () => {
  const scenario = { set: 'many', replicas: 20, claimSize: '64Mi', dataMiB: 16, parallel: 4, kills: [] };
  const seconds = await evacuation(scenario);
  real.node.timings['evacuate: 20 volumes of 64 MiB (16 MiB written), 4 at a time'] = seconds;
});

/**
 * The scenario from a clean start (the previous one's A cordoned, its set gone): its set made on A, A drained, the
 * evacuation run and checked, the set and its claims deleted and every pool checked empty. The evacuation's seconds.
 */
async function evacuation(scenario: Scenario): Promise<number> {
  try {
    return await evacuate(scenario);
  } finally {
    // Whatever the test reached: while the set stands, its Pods hold the claims deployedCluster's cleanUp deletes.
    await real.node.api.delete(`${APPS}/${scenario.set}`).catch(() => undefined);
  }
}

async function evacuate(scenario: Scenario): Promise<number> {
  const { node: cluster, work } = real;
  const { set, replicas } = scenario;
  const claims = claimsOf(scenario);
  const pods = podsOf(scenario);
  // Every Pod of the set on A: the other two cordoned while it starts.
  cluster.kubectl(['uncordon', A]);
  for (const other of [B, C]) cluster.kubectl(['cordon', other]);
  await cluster.api.create(APPS, {
    metadata: { name: set },
    spec: {
      serviceName: set,
      replicas,
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: { app: set } },
      template: {
        metadata: { labels: { app: set } },
        spec: {
          terminationGracePeriodSeconds: 1,
          automountServiceAccountToken: false,
          containers: [
            {
              name: 'app',
              image: imageRef(real.images, 'library/busybox'),
              imagePullPolicy: 'Never',
              // Random data written once, then kept: a Pod started again on the copy finds it there. Renamed into
              // place once whole and synced, so that /data/blob is never seen half written.
              command: [
                'sh',
                '-c',
                `test -f /data/blob || { head -c ${scenario.dataMiB * 2 ** 20} /dev/urandom > /data/part && ` +
                  'sync /data/part && mv /data/part /data/blob && sync; }; exec sleep 3600',
              ],
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            },
          ],
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data', labels: { app: set } },
          spec: {
            accessModes: ['ReadWriteOnce'],
            storageClassName: CLASS,
            resources: { requests: { storage: scenario.claimSize } },
          },
        },
      ],
    },
  });
  const sums = new Map<string, string>();
  for (const pod of pods) {
    const running = await work.waitRunning(pod, 180_000);
    expect(running.spec?.nodeName).toBe(A);
    const sum = await eventually(`${pod}'s data written`, async () => {
      const out = work.exec(pod, 'test -f /data/blob && sha256sum /data/blob || true');
      return out.includes('/data/blob') ? out : undefined;
    });
    sums.set(pod, sum);
  }
  const before = new Map<string, string>();
  for (const claim of claims) {
    const pv = await work.volumeOf(claim);
    expect(nodeOfVolume(pv)).toBe(A);
    before.set(claim, pv.spec?.csi?.volumeHandle ?? '');
  }
  const snapshotName = `${set}-snap`;
  let snapshotHandle: string | undefined;
  if (scenario.snapshot) {
    await createSnapshot(cluster.api, APP_NAMESPACE, snapshotName, claims[0]!);
    snapshotHandle = (await readySnapshot(cluster.api, APP_NAMESPACE, snapshotName)).content.status?.snapshotHandle;
    expect(parseSnapshotId(snapshotHandle ?? '')?.nodeId).toBe(A);
  }
  const moving = [...before.values(), ...(snapshotHandle ? [snapshotHandle] : [])];

  // A retired: cordoned and drained; its Pods come back unschedulable (their PVs say A) until their claims move.
  for (const other of [B, C]) cluster.kubectl(['uncordon', other]);
  const drained = await cluster.kubectlAsync(
    ['drain', A, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=240s'],
    300_000,
  );
  expect({ code: drained.code, output: drained.code === 0 ? '' : drained.output }).toEqual({ code: 0, output: '' });
  await eventually(
    "the set's Pods off A and its volumes unstaged there",
    async () => {
      const listed = await cluster.api.get<V1PodList>(
        `/api/v1/namespaces/${APP_NAMESPACE}/pods?labelSelector=app%3D${set}`,
      );
      // A staged ext4 volume is a loop device over its image (the pool's own disk is one too, its file elsewhere).
      const staged = cluster
        .node(A)
        .loopDevices()
        .filter((device) => device['back-file'].includes('/volumes/'));
      return (
        listed.items.length === replicas && listed.items.every((pod) => pod.spec?.nodeName !== A) && staged.length === 0
      );
    },
    180_000,
    1000,
  );

  const watch = watchPromises(cluster, claims);
  const killer = killDuringMoves(cluster, [...before.values()], scenario.kills);
  const started = Date.now();
  const answer = await cluster.cli([
    'nodes',
    'evacuate',
    A,
    '--parallel',
    String(scenario.parallel),
    '--driver-name',
    DRIVER,
    '--output',
    'json',
  ]);
  const evacuated = (Date.now() - started) / 1000;
  const kills = await killer.stop();
  expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
  const outcome = JSON.parse(answer.stdout) as {
    results: { volumeId: string; targetNodeId: string; newVolumeId?: string; error?: string }[];
  };
  expect(outcome.results.map((result) => result.error)).toEqual(moving.map(() => undefined));
  expect(outcome.results.map((result) => result.volumeId).sort()).toEqual([...moving].sort());
  for (const result of outcome.results) {
    const moved = parseVolumeId(result.newVolumeId ?? '') ?? parseSnapshotId(result.newVolumeId ?? '');
    expect([B, C]).toContain(moved?.nodeId);
  }
  expect(kills).toHaveLength(scenario.kills.length);
  expect(kills.filter((line) => line.includes('failed'))).toEqual([]);

  // Every Pod runs again, on B or C, on its claim's copy, with what it wrote on A.
  for (const pod of pods) {
    const running = await work.waitRunning(pod, 240_000);
    expect([B, C]).toContain(running.spec?.nodeName);
    expect(work.exec(pod, 'sha256sum /data/blob')).toBe(sums.get(pod));
  }
  for (const claim of claims) {
    const pv = await work.volumeOf(claim);
    const moved = outcome.results.find((result) => result.volumeId === before.get(claim));
    expect(pv.spec?.csi?.volumeHandle).toBe(moved?.newVolumeId);
    expect(pv.metadata?.annotations?.['durable-csi.io/moved-from']).toBe(before.get(claim));
  }
  expect(await watch.stop()).toEqual([]);
  if (snapshotHandle) {
    // The VolumeSnapshot, under its name, names the copy on B or C; a claim restored from it there holds db-0's data.
    const { content } = await readySnapshot(cluster.api, APP_NAMESPACE, snapshotName);
    const movedTo = outcome.results.find((result) => result.volumeId === snapshotHandle)?.newVolumeId;
    expect(content.status?.snapshotHandle).toBe(movedTo);
    await work.claim('restored', CLASS, scenario.claimSize, false, {
      apiGroup: 'snapshot.storage.k8s.io',
      kind: 'VolumeSnapshot',
      name: snapshotName,
    });
    await work.pod('restored', 'restored');
    const running = await work.waitRunning('restored', 240_000);
    expect(running.spec?.nodeName).toBe(parseSnapshotId(movedTo ?? '')?.nodeId);
    expect(work.exec('restored', 'sha256sum /data/blob')).toBe(sums.get(pods[0]!));
    await work.deletePod('restored');
    await work.deleteClaim('restored');
    await cluster.api.delete(`${snapshotsPath(APP_NAMESPACE)}/${snapshotName}`);
    await work.waitGone(`${CONTENTS}/${content.metadata?.name}`, "the moved snapshot's content", 120_000);
  }
  // Nothing left on A: no volume, no snapshot, and no PV says A.
  expect(entries(cluster.node(A).poolDir, 'volumes')).toEqual([]);
  expect(entries(cluster.node(A).poolDir, 'snapshots/data')).toEqual([]);
  expect(driverPvs(await cluster.api.get('/api/v1/persistentvolumes')).filter((pv) => nodeOfVolume(pv) === A)).toEqual(
    [],
  );
  console.log(`evacuation of ${replicas} claims off ${A} in ${evacuated} s; killed:\n${kills.join('\n') || 'nothing'}`);

  // The set goes, its claims' volumes with it on B and C; nothing left on any node: no volume, no snapshot (a move's
  // own is deleted at its release), no offer or copy in transfers/.
  await cluster.api.delete(`${APPS}/${set}`);
  for (const pod of pods) await work.waitGone(`/api/v1/namespaces/${APP_NAMESPACE}/pods/${pod}`, `Pod ${pod}`);
  for (const claim of claims) await work.deleteClaim(claim);
  await eventually(
    'every PV gone',
    async () => driverPvs(await cluster.api.get('/api/v1/persistentvolumes')).length === 0,
    180_000,
  );
  for (const node of cluster.nodes) {
    const pool = node.poolDir;
    const left = ['volumes', 'snapshots/data', 'transfers/in', 'transfers/out'].flatMap((dir) => entries(pool, dir));
    expect({ node: node.name, left }).toEqual({ node: node.name, left: [] });
  }
  return evacuated;
}

/** What a pool directory holds, named from the pool (none when it was never made). */
function entries(pool: string, dir: string): string[] {
  const full = path.join(pool, dir);
  return fs.existsSync(full) ? fs.readdirSync(full).map((name) => path.join(dir, name)) : [];
}
