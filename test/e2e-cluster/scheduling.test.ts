import type { CoreV1EventList, V1PersistentVolume } from '@kubernetes/client-node';
import { Client, type WorkflowExecutionInfo } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { createWorkflowId } from '../../common/names';
import { parseQuantity } from '../../common/quantity';
import { CONTENTS, createSnapshot, readySnapshot, snapshotsPath } from '../e2e-k8s/snapshot-objects';
import { DRIVER, NAMESPACE, deployedCluster, nodeDaemonSet } from '../e2e-node/deployed-node';
import type { ClusterNode } from '../e2e-node/real-cluster';
import { APP_NAMESPACE, nodeOfVolume } from '../e2e-node/workloads';
import { eventually } from '../support/eventually';
import { connectTestTemporal } from '../support/test-temporal';

/**
 * Scheduling across three real nodes (issue 35 item 3), against the real kube-scheduler, external-provisioner with
 * capacity tracking (deploy/: the CSIDriver's storageCapacity, the provisioner's --enable-capacity) and the driver:
 * a WaitForFirstConsumer claim goes where it fits, a node whose published capacity is stale answers
 * RESOURCE_EXHAUSTED and the claim is rescheduled, a restore or clone goes to its source's node. One cluster for the
 * file; docs/kubernetes.md, "Several real nodes". Run by `npm run test:cluster`.
 */
jest.setTimeout(300_000);

const NODES = ['dcsi-s1', 'dcsi-s2', 'dcsi-s3'];
const CLASS = 'durable-csi-dir';
const GiB = 1024 ** 3;
const real = deployedCluster({ nodes: NODES, runPrefix: 'dcsi-sched-' });

/** What deploy/'s node DaemonSet gives each pool (its --capacity): every node's figure starts there. */
async function poolBytes(): Promise<number> {
  const daemonSet = await nodeDaemonSet(real.node);
  const args = daemonSet.spec?.template.spec?.containers.find((c) => c.name === 'durable-csi')?.args ?? [];
  const flag = args.find((arg) => arg.startsWith('--capacity='));
  if (!flag) throw new Error(`the node DaemonSet has no --capacity: ${args.join(' ')}`);
  return parseQuantity(flag.slice('--capacity='.length));
}

interface StorageCapacity {
  storageClassName: string;
  nodeTopology?: { matchLabels?: Record<string, string> };
  capacity?: string;
  maximumVolumeSize?: string;
}

/** The CSIStorageCapacity objects external-provisioner published for the class: node -> bytes it says fit. */
async function publishedCapacity(): Promise<Map<string, { capacity: number; maximum: number }>> {
  const list = await real.node.api.get<{ items: StorageCapacity[] }>(
    `/apis/storage.k8s.io/v1/namespaces/${NAMESPACE}/csistoragecapacities`,
  );
  const byNode = new Map<string, { capacity: number; maximum: number }>();
  for (const item of list.items.filter((c) => c.storageClassName === CLASS)) {
    const node = item.nodeTopology?.matchLabels?.['topology.durable-csi.io/node'];
    if (!node) throw new Error(`a CSIStorageCapacity without the driver's topology key: ${JSON.stringify(item)}`);
    byNode.set(node, {
      capacity: parseQuantity(item.capacity ?? '0'),
      maximum: parseQuantity(item.maximumVolumeSize ?? '0'),
    });
  }
  return byNode;
}

/**
 * Until the published objects say `expected` of every node (capacity and largest volume: one volume may take all a
 * dir pool has). They follow the pool after the node's record reports it (a heartbeat, 10 s at most) and the
 * provisioner's next poll (deploy/: 30 s).
 */
async function capacityBecomes(expected: Record<string, number>): Promise<number> {
  const started = Date.now();
  const want = JSON.stringify(Object.entries(expected).map(([node, bytes]) => [node, bytes, bytes]));
  await eventually(
    `published capacity ${JSON.stringify(expected)}`,
    async () => {
      const published = await publishedCapacity();
      const seen = JSON.stringify(
        Object.keys(expected).map((node) => [node, published.get(node)?.capacity, published.get(node)?.maximum]),
      );
      // A throw is "not yet" to eventually(), and its message what a timeout reports.
      if (seen !== want) throw new Error(`published ${seen}, want ${want}`);
      return true;
    },
    90_000,
    500,
  );
  return (Date.now() - started) / 1000;
}

async function eventsOf(name: string): Promise<string[]> {
  const events = await real.node.api.get<CoreV1EventList>(
    `/api/v1/namespaces/${APP_NAMESPACE}/events?fieldSelector=involvedObject.name%3D${name}`,
  );
  return events.items.map((event) => `${event.reason}: ${event.message}`);
}

const keyOf = (pv: V1PersistentVolume) => (pv.spec?.csi?.volumeHandle ?? '').split('_').pop() ?? '';
const volumesOn = (node: ClusterNode) => fs.readdirSync(path.join(node.poolDir, 'volumes')).sort();

/** A claim of `size` whose Pod is pinned to `node`: its volume made there. */
async function claimOn(name: string, node: ClusterNode, size: string, script?: string): Promise<V1PersistentVolume> {
  await real.work.claim(name, CLASS, size);
  await real.work.pod(name, name, { node: node.name, script });
  await real.work.waitRunning(name, 120_000);
  const pv = await real.work.volumeOf(name);
  expect(nodeOfVolume(pv)).toBe(node.name);
  return pv;
}

/** Every run of the create workflow of a volume name, oldest first. */
async function createRuns(volumeName: string): Promise<WorkflowExecutionInfo[]> {
  const connection = await connectTestTemporal();
  try {
    const client = new Client({ connection, namespace: 'default' });
    const runs: WorkflowExecutionInfo[] = [];
    for await (const run of client.workflow.list({ query: `WorkflowId = "${createWorkflowId(DRIVER, volumeName)}"` }))
      runs.push(run);
    return runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  } finally {
    await connection.close();
  }
}

test('a claim that fits on one node only: its Pod is placed there at the first try, where the published capacity says it fits', async () => {
  const cluster = real.node;
  const pool = await poolBytes();
  const [roomy, ...filled] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
  cluster.timings['deploy/ Ready -> every node published with its whole pool'] = await capacityBecomes(
    Object.fromEntries(NODES.map((node) => [node, pool])),
  );
  // Two pools nearly full, with real volumes: each a claim of all but 10 GiB of its node's pool.
  for (const node of filled) await claimOn(`hog-${node.name}`, node, `${pool / GiB - 10}Gi`);
  cluster.timings['two pools filled -> their published capacity follows'] = await capacityBecomes({
    [roomy.name]: pool,
    [filled[0].name]: 10 * GiB,
    [filled[1].name]: 10 * GiB,
  });

  // 50 GiB fits only on the roomy node. Its Pod prefers a full one: without capacity tracking (or with a capacity
  // that does not follow the pool) the scheduler would choose that node, and CreateVolume there would fail.
  await real.work.claim('fits', CLASS, '50Gi');
  await real.work.pod('fits', 'fits', { prefer: filled[0].name, script: 'echo fits > /data/f' });
  const pod = await real.work.waitRunning('fits', 120_000);
  expect(pod.spec?.nodeName).toBe(roomy.name);
  const pv = await real.work.volumeOf('fits');
  expect(nodeOfVolume(pv)).toBe(roomy.name);
  for (const node of cluster.nodes)
    expect([node.name, volumesOn(node).includes(keyOf(pv))]).toEqual([node.name, node === roomy]);
  expect(real.work.exec('fits', 'cat /data/f')).toBe('fits\n');
  // Placed right the first time: one provisioning, no failure, no reschedule.
  const events = await eventsOf('fits');
  expect(events.filter((event) => event.startsWith('ProvisioningFailed'))).toEqual([]);
  expect(events.filter((event) => event.startsWith('ProvisioningSucceeded'))).toHaveLength(1);
  expect(await createRuns(pv.metadata?.name ?? '')).toHaveLength(1);
});

test('the chosen node full behind its published capacity: CreateVolume answers RESOURCE_EXHAUSTED, the claim is rescheduled to another node, nothing left on the full one', async () => {
  const cluster = real.node;
  const pool = await poolBytes();
  const full = cluster.nodes[1] as ClusterNode;
  // The previous scenario's volumes are gone; from the poll that publishes it, the next is 30 s away.
  cluster.timings['claims deleted -> every node published with its whole pool'] = await capacityBecomes(
    Object.fromEntries(NODES.map((node) => [node, pool])),
  );
  // Filled behind its published capacity: a real volume of all but 10 GiB. The provisioner asks GetCapacity again
  // as soon as the volume is made, but the node's record reports the pool's figures on its next heartbeat (10 s),
  // and the provisioner asks again only at its next poll: until then the node is published with its whole pool.
  const filledAt = Date.now();
  const hog = await claimOn('hog', full, `${pool / GiB - 10}Gi`);
  const stale = (await publishedCapacity()).get(full.name);
  expect([full.name, stale?.maximum]).toEqual([full.name, pool]);

  // A claim that fits the published figure, not the pool; its Pod prefers the full node, so the scheduler picks it.
  await real.work.claim('moved', CLASS, '50Gi');
  await real.work.pod('moved', 'moved', { prefer: full.name, script: 'echo moved > /data/f' });
  const exhausted = await eventually(
    'the provisioner reports RESOURCE_EXHAUSTED from the full node',
    async () => (await eventsOf('moved')).find((event) => /^ProvisioningFailed: .*ResourceExhausted/.test(event)),
    60_000,
    250,
  );
  expect(Date.now() - filledAt).toBeLessThan(30_000);
  // The driver's answer: no room on that node, the only node the provisioner asked for (strict topology).
  expect(exhausted).toMatch(new RegExp(`cannot place \\d+ bytes on nodes ${full.name}: 1 without room`));
  const pod = await real.work.waitRunning('moved', 120_000);
  const pv = await real.work.volumeOf('moved');
  expect(pod.spec?.nodeName).not.toBe(full.name);
  expect(nodeOfVolume(pv)).toBe(pod.spec?.nodeName);
  expect(real.work.exec('moved', 'cat /data/f')).toBe('moved\n');
  cluster.timings['stale node chosen -> claim made on another node, Pod Running'] = (Date.now() - filledAt) / 1000;
  for (const node of cluster.nodes)
    expect([node.name, volumesOn(node).includes(keyOf(pv))]).toEqual([node.name, node.name === pod.spec?.nodeName]);
  // Nothing half-made on the full node: its pool holds the hog only (no journal entry left for the refused create).
  expect(volumesOn(full)).toEqual([keyOf(hog)]);
  expect(fs.readdirSync(path.join(full.poolDir, 'records')).map((file) => file.replace(/\.json$/, ''))).toEqual([
    keyOf(hog),
  ]);
  expect(fs.readdirSync(path.join(full.poolDir, 'journal')).filter((entry) => !entry.startsWith('.'))).toEqual([]);
  // The refused runs failed, the last one made the volume; none waits.
  const runs = await createRuns(pv.metadata?.name ?? '');
  expect(runs.map((run) => run.status.name)).toEqual([...runs.slice(0, -1).map(() => 'FAILED'), 'COMPLETED']);
  expect(runs.length).toBeGreaterThan(1);
});

test('a restore and a clone of a volume on one node go to that node, though their Pods prefer another', async () => {
  const cluster = real.node;
  const [elsewhere, , home] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
  const source = await claimOn('source', home, '1Gi', 'echo source > /data/f');
  await createSnapshot(cluster.api, APP_NAMESPACE, 'source-snap', 'source');
  const { content } = await readySnapshot(cluster.api, APP_NAMESPACE, 'source-snap');

  // Both Pods prefer another node: left to itself the scheduler would choose it, where no copy can be made.
  const started = Date.now();
  await real.work.claim('restored', CLASS, '1Gi', false, {
    apiGroup: 'snapshot.storage.k8s.io',
    kind: 'VolumeSnapshot',
    name: 'source-snap',
  });
  await real.work.claim('cloned', CLASS, '1Gi', false, { kind: 'PersistentVolumeClaim', name: 'source' });
  for (const name of ['restored', 'cloned']) await real.work.pod(name, name, { prefer: elsewhere.name });
  for (const name of ['restored', 'cloned']) {
    const pod = await real.work.waitRunning(name, 120_000);
    expect([name, pod.spec?.nodeName]).toEqual([name, home.name]);
    const pv = await real.work.volumeOf(name);
    expect([name, nodeOfVolume(pv)]).toEqual([name, home.name]);
    expect(volumesOn(home)).toContain(keyOf(pv));
    expect(real.work.exec(name, 'cat /data/f')).toBe('source\n');
  }
  cluster.timings['restore and clone created -> both Pods Running on the source node'] = (Date.now() - started) / 1000;
  expect(nodeOfVolume(source)).toBe(home.name);
  await cluster.api.delete(`${snapshotsPath(APP_NAMESPACE)}/source-snap`);
  await real.work.waitGone(`${CONTENTS}/${content.metadata?.name}`, 'the VolumeSnapshotContent of source-snap');
});
