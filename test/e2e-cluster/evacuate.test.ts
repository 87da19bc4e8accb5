import type { V1PersistentVolume, V1PersistentVolumeList, V1PodList } from '@kubernetes/client-node';
import { Client } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { NodeIdKey, PhaseKey, moveWorkflowId, parseVolumeId } from '../../common/names';
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
 * is not on its node, and each claim always has a copy a PV names. Run by `npm run test:cluster` (docs/volume-moves.md).
 */
jest.setTimeout(900_000);

const NODES = ['dcsi-m1', 'dcsi-m2', 'dcsi-m3'];
const [A, B, C] = NODES as [string, string, string];
const CLASS = 'durable-csi-loop-ext4';
const SET = 'db';
const REPLICAS = 3;
const CLAIMS = Array.from({ length: REPLICAS }, (_, i) => `data-${SET}-${i}`);
const PODS = Array.from({ length: REPLICAS }, (_, i) => `${SET}-${i}`);
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
function watchPromises(cluster: RealCluster): { stop(): Promise<string[]> } {
  const wrong: string[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
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
      for (const claim of CLAIMS) {
        const copies = pvs.filter((pv) => pv.spec?.claimRef?.name === claim);
        if (!copies.some((pv) => fs.existsSync(imageOf(cluster, pv.spec?.csi?.volumeHandle ?? '') ?? '')))
          wrong.push(
            `no copy of claim ${claim}: its PVs ${copies.map((pv) => pv.metadata?.name).join(', ') || 'none'}`,
          );
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })().catch((error: unknown) => {
    wrong.push(`the watch failed: ${String(error)}`);
  });
  return {
    async stop() {
      stopped = true;
      await loop;
      return wrong;
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
 * Every 200 ms until stopped: the moves' phases (their workflows' search attributes); the next kill of KILLS made
 * on a move that none made one on yet, in one of its phases. Returns what was killed, where, in which phase.
 */
function killDuringMoves(cluster: RealCluster, volumeIds: string[]): { stop(): Promise<string[]> } {
  const done: string[] = [];
  const killedOn = new Set<string>();
  let stopped = false;
  const loop = (async () => {
    const connection = await connectTestTemporal();
    try {
      const client = new Client({ connection, namespace: 'default' });
      while (!stopped && done.length < KILLS.length) {
        for (const volumeId of volumeIds) {
          const next = KILLS[done.length];
          if (!next || killedOn.has(volumeId)) continue;
          const description = await client.workflow
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
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    } finally {
      await connection.close();
    }
  })().catch((error: unknown) => {
    done.push(`the killer failed: ${String(error)}`);
  });
  return {
    async stop() {
      stopped = true;
      await loop;
      return done;
    },
  };
}

test("nodes evacuate moves a drained node's StatefulSet volumes to the others, its agents and controllers killed on the way: every Pod runs again on B or C with its data", async () => {
  try {
    await evacuation();
  } finally {
    // Whatever the test reached: while the set stands, its Pods hold the claims deployedCluster's cleanUp deletes.
    await real.node.api.delete(`${APPS}/${SET}`).catch(() => undefined);
  }
});

async function evacuation(): Promise<void> {
  const { node: cluster, work } = real;
  // Every Pod of the set on A: the other two cordoned while it starts.
  for (const other of [B, C]) cluster.kubectl(['cordon', other]);
  await cluster.api.create(APPS, {
    metadata: { name: SET },
    spec: {
      serviceName: SET,
      replicas: REPLICAS,
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: { app: SET } },
      template: {
        metadata: { labels: { app: SET } },
        spec: {
          terminationGracePeriodSeconds: 1,
          automountServiceAccountToken: false,
          containers: [
            {
              name: 'app',
              image: imageRef(real.images, 'library/busybox'),
              imagePullPolicy: 'Never',
              // 64 MiB of random data written once, then kept: a Pod started again on the copy finds it there.
              command: [
                'sh',
                '-c',
                'test -f /data/blob || head -c 67108864 /dev/urandom > /data/blob; sync; exec sleep 3600',
              ],
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            },
          ],
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data', labels: { app: SET } },
          spec: {
            accessModes: ['ReadWriteOnce'],
            storageClassName: CLASS,
            resources: { requests: { storage: '256Mi' } },
          },
        },
      ],
    },
  });
  const sums = new Map<string, string>();
  for (const pod of PODS) {
    const running = await work.waitRunning(pod, 180_000);
    expect(running.spec?.nodeName).toBe(A);
    const sum = await eventually(`${pod}'s data written`, async () => {
      const out = work.exec(pod, 'test -f /data/blob && sha256sum /data/blob || true');
      return out.includes('/data/blob') ? out : undefined;
    });
    sums.set(pod, sum);
  }
  const before = new Map<string, string>();
  for (const claim of CLAIMS) {
    const pv = await work.volumeOf(claim);
    expect(nodeOfVolume(pv)).toBe(A);
    before.set(claim, pv.spec?.csi?.volumeHandle ?? '');
  }

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
      const pods = await cluster.api.get<V1PodList>(
        `/api/v1/namespaces/${APP_NAMESPACE}/pods?labelSelector=app%3D${SET}`,
      );
      // A staged ext4 volume is a loop device over its image (the pool's own disk is one too, its file elsewhere).
      const staged = cluster
        .node(A)
        .loopDevices()
        .filter((device) => device['back-file'].includes('/volumes/'));
      return (
        pods.items.length === REPLICAS && pods.items.every((pod) => pod.spec?.nodeName !== A) && staged.length === 0
      );
    },
    180_000,
    1000,
  );

  const watch = watchPromises(cluster);
  const killer = killDuringMoves(cluster, [...before.values()]);
  const started = Date.now();
  const answer = await cluster.cli([
    'nodes',
    'evacuate',
    A,
    '--parallel',
    '1',
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
  expect(outcome.results.map((result) => result.error)).toEqual(CLAIMS.map(() => undefined));
  expect(outcome.results.map((result) => result.volumeId).sort()).toEqual([...before.values()].sort());
  for (const result of outcome.results) expect([B, C]).toContain(parseVolumeId(result.newVolumeId ?? '')?.nodeId);
  expect(kills).toHaveLength(KILLS.length);
  expect(kills.filter((line) => line.includes('failed'))).toEqual([]);

  // Every Pod runs again, on B or C, on its claim's copy, with what it wrote on A.
  for (const pod of PODS) {
    const running = await work.waitRunning(pod, 240_000);
    expect([B, C]).toContain(running.spec?.nodeName);
    expect(work.exec(pod, 'sha256sum /data/blob')).toBe(sums.get(pod));
  }
  for (const claim of CLAIMS) {
    const pv = await work.volumeOf(claim);
    const moved = outcome.results.find((result) => result.volumeId === before.get(claim));
    expect(pv.spec?.csi?.volumeHandle).toBe(moved?.newVolumeId);
    expect(pv.metadata?.annotations?.['durable-csi.io/moved-from']).toBe(before.get(claim));
  }
  expect(await watch.stop()).toEqual([]);
  // Nothing left on A: no volume, and no PV says A.
  expect(entries(cluster.node(A).poolDir, 'volumes')).toEqual([]);
  expect(driverPvs(await cluster.api.get('/api/v1/persistentvolumes')).filter((pv) => nodeOfVolume(pv) === A)).toEqual(
    [],
  );
  cluster.timings[`evacuate: ${REPLICAS} volumes of 256 MiB (64 MiB written), one at a time, 3 kills`] = evacuated;
  console.log(`evacuation of ${A} in ${evacuated} s; killed:\n${kills.join('\n')}`);

  // The set goes, its claims' volumes with it on B and C; nothing left on any node: no volume, no snapshot (a move's
  // own is deleted at its release), no offer or copy in transfers/.
  await cluster.api.delete(`${APPS}/${SET}`);
  for (const pod of PODS) await work.waitGone(`/api/v1/namespaces/${APP_NAMESPACE}/pods/${pod}`, `Pod ${pod}`);
  for (const claim of CLAIMS) await work.deleteClaim(claim);
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
}

/** What a pool directory holds, named from the pool (none when it was never made). */
function entries(pool: string, dir: string): string[] {
  const full = path.join(pool, dir);
  return fs.existsSync(full) ? fs.readdirSync(full).map((name) => path.join(dir, name)) : [];
}
