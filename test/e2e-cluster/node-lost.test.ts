import type { CoreV1EventList, V1PersistentVolume, V1Pod, V1PodList } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { KubeError } from '../e2e-k8s/kube-rest';
import { CONTENTS, createSnapshot, getOrGone, readySnapshot, snapshotsPath } from '../e2e-k8s/snapshot-objects';
import { DRIVER, NAMESPACE, controllerDeployment, deployedCluster, driverReady } from '../e2e-node/deployed-node';
import { classFigures } from '../e2e-node/figures';
import { imageRef } from '../e2e-node/images';
import type { ClusterNode } from '../e2e-node/real-cluster';
import { RolloutWatch, type Watched } from '../e2e-node/rollout-watch';
import { APP_NAMESPACE } from '../e2e-node/workloads';
import { nodeRecordWorkflowId } from '../../common/names';
import { AGENT_NOT_READY } from '../../kubernetes/agent-readiness';
import { readNodeRecord } from '../../node-records/reads';
import { call, connectCsi, withDeadline } from '../../csi/client';
import { PoolLayout } from '../../storage/pool/pool-layout';
import { temporalAddress } from '../support/cluster';
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
// Each pool on a disk of its own (an ext4 image), so that a rebooted node can come up before its pool's disk.
const real = deployedCluster({ nodes: NODES, notReadyAfterSeconds: NOT_READY_AFTER, poolFilesystem: 'ext4' });
/** The last field of a volume or snapshot ID: its key, the name of its directory in the pool. */
const keyOfId = (id: string | undefined) => (id ?? '').split('_').pop() ?? '';
const keyOf = (pv: V1PersistentVolume) => keyOfId(pv.spec?.csi?.volumeHandle);
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
  // Each pool a filesystem of its own (its disk), none the host's.
  const pools = cluster.nodes.map((node) => fs.statSync(node.poolDir).dev);
  expect(new Set([...pools, fs.statSync('/').dev]).size).toBe(NODES.length + 1);
});

test('30 claims across the three nodes, 5 at a time: PVC created -> Bound, -> Pod Running, PVC deleted -> PV gone', async () => {
  await classFigures(real, 'dir, 3 nodes', 'durable-csi-dir', '64Mi');
  const figures = Object.entries(real.node.timings).filter(([what]) => what.startsWith('dir, 3 nodes'));
  console.log(`30 claims on three nodes (s):\n${figures.map(([what, value]) => `${what}: ${value}`).join('\n')}`);
  // The scheduler spread them: every node made and deleted volumes.
  for (const node of NODES) expect(real.node.timings[`dir, 3 nodes: Pods on ${node} (count)`]).toBeGreaterThan(0);
}, 600_000);

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
  await untilUnstaged(lost, lostPv);
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
    // The node lifecycle controller marks the node's Pods not ready with it; the controller's watch of the agents'
    // Pods (--agent-pods) then fails the frozen agent's presence: its record offline well before the agents'
    // --presence-timeout (5 min in deploy/), and by the watch, as its history says.
    const notReady = Date.now();
    await eventually(`${lost.name}'s record offline`, () => recordOfflineByWatch(lost.name), 60_000, 500);
    cluster.timings['Node NotReady -> its record offline (agent Pod watch)'] = (Date.now() - notReady) / 1000;

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

/** The Events recorded on an object (cluster-wide: a PV's land in `default`), as reason: message. */
async function eventsOn(name: string): Promise<string[]> {
  const list = await real.node.api.get<CoreV1EventList>(`/api/v1/events?fieldSelector=involvedObject.name%3D${name}`);
  return list.items.map((event) => `${event.reason}: ${event.message}`);
}

async function eventOn(name: string, reason: string, timeoutMs = 120_000): Promise<string> {
  return eventually(
    `a ${reason} event on ${name}`,
    async () => (await eventsOn(name)).find((event) => event.startsWith(`${reason}: `)),
    timeoutMs,
    500,
  );
}

/** A node that runs no controller replica now: losing it leaves both controllers (and their leases) running. */
async function nodeWithoutController(): Promise<ClusterNode> {
  const controllers = await real.node.api.get<V1PodList>(
    `/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dcontroller`,
  );
  const withController = new Set(controllers.items.map((pod) => pod.spec?.nodeName));
  return real.node.nodes.find((node) => !withController.has(node.name)) ?? (real.node.nodes[2] as ClusterNode);
}

/**
 * Until kubelet has unstaged the volume, which it does after the Pod is gone from the API. A kubelet stopped in
 * between never unstages it once restarted (it rebuilds its state from Pod directories only: kubernetes/kubernetes
 * #85476), and the pool refuses to delete a staged volume: a node halted right after deletePod kept a written-off
 * volume for good (CI, loaded, once). docs/operations.md, "A deletion refused: staged".
 */
async function untilUnstaged(node: ClusterNode, pv: V1PersistentVolume): Promise<void> {
  await eventually(`${pv.metadata?.name} unstaged on ${node.name}`, async () => !staged(node, pv), 60_000, 250);
}

/** The pool's record of the volume's staging (NodeStageVolume done, NodeUnstageVolume not yet). */
const staged = (node: ClusterNode, pv: V1PersistentVolume) =>
  fs.existsSync(new PoolLayout(node.poolDir).stagingFile(keyOf(pv)));

/** A claim on `node` whose Pod wrote `/data/f` (and stays, unless `keepPod` is false), and its PV once bound. */
async function claimOn(node: ClusterNode, name: string, keepPod = true): Promise<V1PersistentVolume> {
  await real.work.claim(name, 'durable-csi-dir');
  await real.work.pod(name, name, { node: node.name, script: `echo ${name} > /data/f` });
  await real.work.waitRunning(name, 180_000);
  const pv = await real.work.volumeOf(name);
  expect(staged(node, pv)).toBe(true);
  if (!keepPod) {
    await real.work.deletePod(name);
    await untilUnstaged(node, pv);
  }
  expect(fs.existsSync(volumeDir(node, pv))).toBe(true);
  return pv;
}

/** Until the Pod runs again (its node back) and reads what it wrote before. */
async function podReadsItsData(name: string): Promise<void> {
  await eventually(
    `Pod ${name} Running again, reading its data`,
    async () => {
      const pod = await real.work.getPod(name);
      const ready = pod.status?.containerStatuses?.every((status) => status.ready) ?? false;
      return pod.status?.phase === 'Running' && ready && real.work.exec(name, 'cat /data/f') === `${name}\n`;
    },
    240_000,
    1000,
  );
}

/** The node plugin's log on `node` (its agent's), through kubelet. */
function pluginLog(node: ClusterNode): string {
  const pods = real.node.kubectl([
    'get',
    'pods',
    '-n',
    NAMESPACE,
    '-l',
    'app.kubernetes.io/component=node',
    '--field-selector',
    `spec.nodeName=${node.name}`,
    '-o',
    'name',
  ]);
  const pod = pods.trim().split('\n')[0] ?? '';
  return real.node.kubectl(['logs', '-n', NAMESPACE, pod, '-c', 'durable-csi', '--tail=400']);
}

/** The node's record shows it offline, its last presence hold failed by the controller's watch of its agent's Pod. */
async function recordOfflineByWatch(nodeName: string): Promise<boolean> {
  const connection = await Connection.connect({ address: temporalAddress() });
  try {
    const client = new Client({ connection });
    if ((await readNodeRecord(client, DRIVER, nodeName))?.node?.live !== false) return false;
    const events = (await client.workflow.getHandle(nodeRecordWorkflowId(DRIVER, nodeName)).fetchHistory()).events;
    return (events ?? []).some(
      (event) => event.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type === AGENT_NOT_READY,
    );
  } finally {
    await connection.close();
  }
}

/**
 * What a failed wait on a returning node prints: its Pods, its record (phase, memo, pending activities, the last
 * events of its history) and its node plugin's log. A wait that ends in CI leaves nothing else to read.
 */
async function nodeDiagnostics(node: ClusterNode): Promise<string> {
  const quietly = async (what: string, read: () => Promise<string> | string) => {
    try {
      return `--- ${what}:\n${await read()}`;
    } catch (error) {
      return `--- ${what}: ${String(error)}`;
    }
  };
  const connection = await Connection.connect({ address: temporalAddress() });
  try {
    const record = new Client({ connection }).workflow.getHandle(nodeRecordWorkflowId(DRIVER, node.name));
    return [
      await quietly('Pods on the node', () =>
        real.node.kubectl(['get', 'pods', '-A', '-o', 'wide', '--field-selector', `spec.nodeName=${node.name}`]),
      ),
      await quietly('its record', async () => {
        const described = await record.describe();
        const pending = (described.raw.pendingActivities ?? []).map((activity) => ({
          type: activity.activityType?.name,
          state: activity.state,
          attempt: activity.attempt,
          lastFailure: activity.lastFailure?.message,
        }));
        return JSON.stringify({ status: described.status.name, memo: described.memo, pending }, undefined, 1);
      }),
      await quietly('its last 40 events', async () => {
        const events = (await record.fetchHistory()).events ?? [];
        return events
          .slice(-40)
          .map(
            (event) =>
              `${String(event.eventId)} ${String(event.eventType)} ${JSON.stringify(event.eventTime?.seconds)}`,
          )
          .join('\n');
      }),
      await quietly('its node plugin log', () => pluginLog(node).slice(-8000)),
    ].join('\n');
  } finally {
    await connection.close();
  }
}

/** Long enough for a halted node's Node to be deleted, re-created and Ready well before it; short for the test. */
const FORGET_AFTER = 40;

test(`the Node deleted, --node-deleted forget-after:${FORGET_AFTER}s: re-created before the deadline nothing is forgotten; kept away past it the node is forgotten, and re-created with its disk it keeps its volumes and deletes what was written off`, async () => {
  const { node: cluster, work } = real;
  // The admin's change to deploy/'s controller (its default is wait): the argument replaced, the Deployment rolls.
  const deployment = await controllerDeployment(cluster);
  const containers = deployment.spec?.template.spec?.containers ?? [];
  const c = containers.findIndex((container) => container.name === 'durable-csi');
  const a = (containers[c]?.args ?? []).indexOf('--node-deleted=wait');
  expect([c, a].every((index) => index >= 0)).toBe(true);
  const policy = `--node-deleted=forget-after:${FORGET_AFTER}s`;
  cluster.kubectl([
    'patch',
    '-n',
    NAMESPACE,
    'deployment/durable-csi-controller',
    '--type=json',
    '-p',
    JSON.stringify([{ op: 'replace', path: `/spec/template/spec/containers/${c}/args/${a}`, value: policy }]),
  ]);
  await driverReady(cluster);
  await eventually(
    'only controller Pods with the new policy',
    async () => {
      const pods = await cluster.api.get<V1PodList>(
        `/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dcontroller`,
      );
      return (
        pods.items.length === 2 &&
        pods.items.every((pod) => pod.spec?.containers.some((container) => container.args?.includes(policy)))
      );
    },
    120_000,
    500,
  );
  const node = await nodeWithoutController();
  const keep = await claimOn(node, 'nd-keep');
  const keepPv = keep.metadata?.name ?? '';
  const gone = await claimOn(node, 'nd-gone', false);

  // Re-created before the deadline: the decision announced, then cancelled; past the deadline nothing forgotten.
  await node.halt();
  await cluster.api.delete(`/api/v1/nodes/${node.name}`);
  const deletedAt = Date.now();
  expect(await eventOn(keepPv, 'NodeDeleted')).toMatch(
    new RegExp(`forgets the node at .* unless the Node returns first \\(${policy}\\)`),
  );
  await node.resume();
  cluster.timings['Node deleted -> re-created (kubelet registers it) and Ready'] = (Date.now() - deletedAt) / 1000;
  expect(Date.now() - deletedAt).toBeLessThan((FORGET_AFTER - 10) * 1000);
  expect(await eventOn(keepPv, 'NodeReturned')).toMatch(/forgetting the node is cancelled/);
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, deletedAt + (FORGET_AFTER + 10) * 1000 - Date.now())));
  expect((await eventsOn(keepPv)).filter((event) => event.startsWith('NodeForgotten'))).toEqual([]);
  await podReadsItsData('nd-keep');
  expect(fs.existsSync(volumeDir(node, gone))).toBe(true);

  // Kept away past the deadline: forgotten, recorded on its PVs. A claim deleted then ends with that decision (its
  // PV goes, its volume written off while still on the absent node's disk); the node back with the same disk
  // deletes what was written off and keeps the rest.
  await node.halt();
  await cluster.api.delete(`/api/v1/nodes/${node.name}`);
  const deletedAgain = Date.now();
  await eventOn(keepPv, 'NodeForgotten', (FORGET_AFTER + 90) * 1000);
  const forgottenAfter = (Date.now() - deletedAgain) / 1000;
  cluster.timings['Node deleted -> NodeForgotten event'] = forgottenAfter;
  expect(forgottenAfter).toBeGreaterThanOrEqual(FORGET_AFTER);
  expect(await eventsOn(gone.metadata?.name ?? '')).toEqual(
    expect.arrayContaining([expect.stringMatching(/^NodeForgotten: durable-csi forgot node /)]),
  );
  await work.deleteClaim('nd-gone');
  await work.waitGone(`/api/v1/persistentvolumes/${gone.metadata?.name}`, 'PV of nd-gone', 120_000);
  expect(fs.existsSync(volumeDir(node, gone))).toBe(true);
  const back = Date.now();
  await node.resume();
  await eventually(
    `written-off ${keyOf(gone)} deleted from ${node.name}'s disk`,
    async () => !fs.existsSync(volumeDir(node, gone)),
    180_000,
    500,
  ).catch(async (error: unknown) => {
    throw new Error(`${String(error)}\n${await nodeDiagnostics(node)}`);
  });
  cluster.timings['forgotten Node re-created -> its written-off volume deleted'] = (Date.now() - back) / 1000;
  expect(await eventOn(node.name, 'WrittenOffDeleted')).toContain(gone.spec?.csi?.volumeHandle ?? 'no handle');
  await podReadsItsData('nd-keep');
  expect(fs.existsSync(volumeDir(node, keep))).toBe(true);
  // Live again: a new volume goes there, and a deletion deletes (nothing written off any more).
  const fresh = await claimOn(node, 'nd-new', false);
  await work.deleteClaim('nd-new');
  await work.waitGone(`/api/v1/persistentvolumes/${fresh.metadata?.name}`, 'PV of nd-new', 120_000);
  expect(fs.existsSync(volumeDir(node, fresh))).toBe(false);
}, 900_000);

test('a node rebooted, its pool disk mounted only after the agent started: a deletion meanwhile waits, nothing is reported absent, nothing lost', async () => {
  const { node: cluster, work } = real;
  const node = await nodeWithoutController();
  const keep = await claimOn(node, 'rb-keep');
  const del = await claimOn(node, 'rb-del', false);
  await createSnapshot(cluster.api, APP_NAMESPACE, 'rb-snap', 'rb-keep');
  const { content } = await readySnapshot(cluster.api, APP_NAMESPACE, 'rb-snap');
  const copyDir = () => path.join(node.poolDir, 'snapshots', 'data', keyOfId(content.status?.snapshotHandle));
  expect(fs.existsSync(copyDir())).toBe(true);
  // What lies under the pool's mount point: the node's root filesystem. Nothing may ever be written there.
  const underneath = path.join(node.dir, 'host', 'var-lib-durable-csi', 'pool');
  expect(fs.readdirSync(underneath)).toEqual([]);
  const delPv = del.metadata?.name ?? '';
  const keepPv = keep.metadata?.name ?? 'no PV';
  const contentPath = `${CONTENTS}/${content.metadata?.name}`;

  // Sampled from before the power-off to the end: when the PV and the content went (neither may go before the
  // pool's disk is mounted again: until then the agent cannot know whether their data is gone).
  const goneAt = new Map<string, number>();
  const sample = async () => {
    for (const [what, objectPath] of [
      ['PV', `/api/v1/persistentvolumes/${delPv}`],
      ['content', contentPath],
    ] as const)
      if (!goneAt.has(what) && (await getOrGone(cluster.api, objectPath)) === undefined) goneAt.set(what, Date.now());
  };
  let sampling = Promise.resolve();
  const sampler = setInterval(() => (sampling = sampling.then(sample)), 250);
  let mountedAt = Number.POSITIVE_INFINITY;
  try {
    await rebootWithLateDisk();
  } finally {
    clearInterval(sampler);
    await sampling;
    // One more look: the reboot's waits may see an object gone before a sample under way does (seen once: the PV).
    await sample();
    // A failure before the disk came back: mounted now, so that the next scenarios find the node whole.
    if (!Number.isFinite(mountedAt) && node.ns?.alive()) node.mountPoolDisk();
  }
  expect(goneAt.size).toBe(2);
  for (const [what, at] of goneAt) expect([what, at >= mountedAt]).toEqual([what, true]);
  expect(fs.existsSync(volumeDir(node, del))).toBe(false);
  expect(fs.existsSync(copyDir())).toBe(false);
  expect(fs.existsSync(volumeDir(node, keep))).toBe(true);
  expect(fs.readdirSync(underneath)).toEqual([]);

  async function rebootWithLateDisk(): Promise<void> {
    const off = Date.now();
    await node.powerOff();
    expect(node.pluginRunning()).toBe(false);
    await work.deleteClaim('rb-del');
    await cluster.api.delete(`${snapshotsPath(APP_NAMESPACE)}/rb-snap`);
    await node.boot(real.images, { mountPoolLater: true });
    cluster.timings['reboot: powered off -> Node Ready again (pool disk not mounted)'] = (Date.now() - off) / 1000;
    // The agent runs and finds an empty directory where its record remembers a pool: it waits, saying so.
    await eventually(
      `${node.name}'s agent holds its storage work: the pool it remembers is not mounted`,
      () => /has no pool identity \(an empty directory\).* runs no storage work/.test(pluginLog(node)),
      180_000,
      1000,
    );
    // Held so for a while (csi-provisioner, snapshot-controller and kubelet retry meanwhile): nothing may give.
    const until = Date.now() + 25_000;
    while (Date.now() < until) {
      expect(await pvExists(delPv)).toBe(true);
      expect(await getOrGone(cluster.api, contentPath)).toBeDefined();
      // kubelet's NodeStage and NodePublish of the kept volume answer UNAVAILABLE: no mount of it on the node.
      expect(node.mountinfo()).not.toContain(keepPv);
      expect(fs.readdirSync(node.poolDir)).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    mountedAt = Date.now();
    node.mountPoolDisk();
    await work.waitGone(`/api/v1/persistentvolumes/${delPv}`, 'PV of rb-del', 180_000);
    cluster.timings['reboot: pool disk mounted -> the deletion made meanwhile done'] = (Date.now() - mountedAt) / 1000;
    await work.waitGone(contentPath, 'VolumeSnapshotContent of rb-snap', 180_000);
    await podReadsItsData('rb-keep');
    cluster.timings['reboot: pool disk mounted -> its Pod running again on its data'] = (Date.now() - mountedAt) / 1000;
  }
}, 900_000);

/** An app as a Deployment of one Pod on `node` holding `claim` (a bare Pod is not drained without --force). */
async function appOn(name: string, claim: string, node: ClusterNode): Promise<void> {
  await real.node.api.create(`/apis/apps/v1/namespaces/${APP_NAMESPACE}/deployments`, {
    metadata: { name },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          terminationGracePeriodSeconds: 1,
          automountServiceAccountToken: false,
          nodeSelector: { 'kubernetes.io/hostname': node.name },
          containers: [
            {
              name: 'app',
              image: busyboxRef(),
              imagePullPolicy: 'Never',
              command: ['sh', '-c', `[ -f /data/f ] || echo ${name} > /data/f; exec sleep 3600`],
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            },
          ],
          volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }],
        },
      },
    },
  });
}

const busyboxRef = () => imageRef(real.images, 'library/busybox');

async function appPods(name: string): Promise<V1Pod[]> {
  return (await real.node.api.get<V1PodList>(`/api/v1/namespaces/${APP_NAMESPACE}/pods?labelSelector=app%3D${name}`))
    .items;
}

async function runningAppPod(name: string): Promise<V1Pod> {
  return eventually(
    `a Pod of ${name} Running and ready`,
    async () =>
      (await appPods(name)).find(
        (pod) =>
          !pod.metadata?.deletionTimestamp &&
          pod.status?.phase === 'Running' &&
          (pod.status.containerStatuses ?? []).every((status) => status.ready),
      ),
    180_000,
    500,
  );
}

test('kubectl drain of a node while claims on it are deleted and others made: PodDisruptionBudgets hold, the node plugin stays, nothing lost', async () => {
  const { node: cluster, work } = real;
  const controllers = await cluster.api.get<V1PodList>(
    `/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dcontroller`,
  );
  // A node with a controller replica: deploy/'s PDB lets the drain evict it, one replica at a time.
  const drained = cluster.node(controllers.items[0]?.spec?.nodeName ?? '');
  await work.claim('dr-app', 'durable-csi-dir');
  await appOn('dr-app', 'dr-app', drained);
  await cluster.api.create(`/apis/policy/v1/namespaces/${APP_NAMESPACE}/poddisruptionbudgets`, {
    metadata: { name: 'dr-app' },
    spec: { minAvailable: 1, selector: { matchLabels: { app: 'dr-app' } } },
  });
  const appPod = await runningAppPod('dr-app');
  const appPv = await work.volumeOf('dr-app');
  expect(nodeOfVolume(appPv)).toBe(drained.name);
  const del = await claimOn(drained, 'dr-del', false);
  const pluginOf = async () =>
    (
      await cluster.api.get<V1PodList>(
        `/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dnode&fieldSelector=spec.nodeName%3D${drained.name}`,
      )
    ).items.map((pod) => pod.metadata?.uid);
  const plugin = await pluginOf();
  expect(plugin).toHaveLength(1);
  const watched: Watched[] = [{ pv: del.metadata?.name ?? '', dir: volumeDir(drained, del), node: drained.name }];
  const deletion: { at?: number } = {};
  const watch = new RolloutWatch(
    cluster,
    watched,
    () => deletion.at,
    (name) => (name === undefined ? cluster.nodes.some((n) => n.pluginRunning()) : cluster.node(name).pluginRunning()),
  );
  watch.start();
  const drain = (timeout: string) =>
    cluster.kubectlAsync([
      'drain',
      drained.name,
      '--ignore-daemonsets',
      '--delete-emptydir-data',
      `--timeout=${timeout}`,
    ]);
  try {
    // The app's PDB (minAvailable 1) holds its only Pod: the drain gives up, the Pod untouched. Meanwhile the claim
    // on the drained node is deleted and new claims are made (they go elsewhere: the node is cordoned).
    const held = drain('40s');
    deletion.at = Date.now();
    await work.deleteClaim('dr-del');
    const news = ['dr-new-0', 'dr-new-1', 'dr-new-2'];
    for (const name of news) {
      await work.claim(name, 'durable-csi-dir');
      await work.pod(name, name, { script: `echo ${name} > /data/f` });
    }
    const first = await held;
    expect(first.code).not.toBe(0);
    expect(first.output).toMatch(/disruption budget/);
    const stillThere = await runningAppPod('dr-app');
    expect(stillThere.metadata?.uid).toBe(appPod.metadata?.uid);
    expect(work.exec(stillThere.metadata?.name ?? '', 'cat /data/f')).toBe('dr-app\n');
    for (const name of news) {
      const pod = await work.waitRunning(name, 180_000);
      expect(pod.spec?.nodeName).not.toBe(drained.name);
      expect(work.exec(name, 'cat /data/f')).toBe(`${name}\n`);
    }
    await work.waitGone(`/api/v1/persistentvolumes/${del.metadata?.name}`, 'PV of dr-del', 180_000);
    expect(fs.existsSync(volumeDir(drained, del))).toBe(false);
    // deploy/'s controller PDB let one replica go; the Deployment has both Ready again, none on the drained node.
    await driverReady(cluster);

    // The app's PDB lifted (its owner's decision): the drain completes. The app's Pod is evicted and its successor
    // waits for the node (its volume lives there); the node plugin was never evicted.
    await cluster.api.delete(`/apis/policy/v1/namespaces/${APP_NAMESPACE}/poddisruptionbudgets/dr-app`);
    const drainedAt = Date.now();
    const second = await drain('120s');
    expect([second.code, second.output]).toEqual([0, expect.stringMatching(/drained/)]);
    cluster.timings['drain: PDB lifted -> node drained'] = (Date.now() - drainedAt) / 1000;
    const after = await cluster.api.get<V1PodList>(`/api/v1/pods?fieldSelector=spec.nodeName%3D${drained.name}`);
    expect(
      after.items
        .filter((pod) => !pod.metadata?.deletionTimestamp)
        .map((pod) => pod.metadata?.labels?.['app.kubernetes.io/component'] ?? pod.metadata?.name),
    ).toEqual(['node']);
    expect(await pluginOf()).toEqual(plugin);
    expect(drained.pluginRunning()).toBe(true);
    expect(fs.existsSync(volumeDir(drained, appPv))).toBe(true);
    cluster.kubectl(['uncordon', drained.name]);
    const back = await runningAppPod('dr-app');
    expect(back.spec?.nodeName).toBe(drained.name);
    expect(work.exec(back.metadata?.name ?? '', 'cat /data/f')).toBe('dr-app\n');
  } finally {
    await watch.stop();
    cluster.kubectl(['uncordon', drained.name]);
    await cluster.api.delete(`/apis/apps/v1/namespaces/${APP_NAMESPACE}/deployments/dr-app`).catch(() => undefined);
    await eventually('the app Pods gone', async () => (await appPods('dr-app')).length === 0, 120_000, 500);
  }
  expect(watch.violations).toEqual([]);
}, 900_000);

/** What the evacuated claims hold, as their Pods see it: the data's sum, modes, owners and the link. */
const DESCRIBE_DATA = "sha256sum /data/blob; stat -c '%a %u:%g %N' /data/blob /data/link";

test('nodes evacuate of a cordoned dir node: each claim bound to a copy on another dir node, its data there (files, modes, a link), nothing left on the node', async () => {
  const { node: cluster, work } = real;
  const node = await nodeWithoutController();
  const claims = ['ev-dir-0', 'ev-dir-1'];
  const script = 'head -c 3000000 /dev/urandom > /data/blob && chmod 600 /data/blob && ln -s blob /data/link';
  const pvs = new Map<string, V1PersistentVolume>();
  const sums = new Map<string, string>();
  for (const claim of claims) {
    await work.claim(claim, 'durable-csi-dir');
    await work.pod(claim, claim, { node: node.name, script });
    await work.waitRunning(claim, 180_000);
    sums.set(claim, work.exec(claim, DESCRIBE_DATA));
    pvs.set(claim, await work.volumeOf(claim));
  }
  cluster.kubectl(['cordon', node.name]);
  try {
    for (const claim of claims) {
      await work.deletePod(claim);
      await untilUnstaged(node, pvs.get(claim) as V1PersistentVolume);
    }
    const answer = await cluster.cli(['nodes', 'evacuate', node.name, '--driver-name', DRIVER, '--output', 'json']);
    expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
    const { results } = JSON.parse(answer.stdout) as { results: { volumeId: string; newVolumeId?: string }[] };
    expect(results.map((result) => result.volumeId).sort()).toEqual(
      claims.map((claim) => pvs.get(claim)?.spec?.csi?.volumeHandle).sort(),
    );
    for (const claim of claims) {
      const pv = await work.volumeOf(claim);
      const moved = results.find((result) => result.volumeId === pvs.get(claim)?.spec?.csi?.volumeHandle);
      expect(pv.spec?.csi?.volumeHandle).toBe(moved?.newVolumeId);
      expect(nodeOfVolume(pv)).not.toBe(node.name);
      // A Pod made again without a node: the scheduler follows the new PV's node affinity.
      await work.pod(claim, claim);
      const running = await work.waitRunning(claim, 180_000);
      expect(running.spec?.nodeName).toBe(nodeOfVolume(pv));
      expect(work.exec(claim, DESCRIBE_DATA)).toBe(sums.get(claim));
    }
    expect(fs.readdirSync(path.join(node.poolDir, 'volumes'))).toEqual([]);
    for (const dir of ['snapshots/data', 'transfers/in', 'transfers/out'])
      for (const each of cluster.nodes) {
        const full = path.join(each.poolDir, dir);
        expect({ node: each.name, dir, left: fs.existsSync(full) ? fs.readdirSync(full) : [] }).toEqual({
          node: each.name,
          dir,
          left: [],
        });
      }
  } finally {
    cluster.kubectl(['uncordon', node.name]);
  }
  for (const claim of claims) {
    await work.deletePod(claim);
    await work.deleteClaim(claim);
  }
}, 600_000);

test('a staging kubelet forgot (kubernetes#85476): the deletion is refused, the PV kept; the runbook has kubelet unstage it and the deletion goes through', async () => {
  const { node: cluster, work } = real;
  const node = cluster.nodes[0] as ClusterNode;
  const pv = await claimOn(node, 'st-forgot', false);
  const csi = pv.spec?.csi;
  const pvName = pv.metadata?.name ?? '';
  const ns = node.ns;
  if (!csi || !ns) throw new Error(`PV ${pvName} has no CSI source, or ${node.name} is off`);
  // What a kubelet stopped between NodeUnpublishVolume and NodeUnstageVolume leaves: the volume staged at the path
  // kubelet derives from its volume ID, and no kubelet that knows it. Staged here by a CSI call kubelet never made.
  const digest = createHash('sha256').update(csi.volumeHandle).digest('hex');
  const globalmount = `/var/lib/kubelet/plugins/kubernetes.io/csi/${DRIVER}/${digest}/globalmount`;
  fs.mkdirSync(`/proc/${ns.pid}/root${globalmount}`, { recursive: true });
  const plugin = connectCsi(`unix:///proc/${ns.pid}/root/var/lib/kubelet/plugins/${DRIVER}/csi.sock`);
  try {
    await call((done) =>
      plugin.node.NodeStageVolume(
        {
          volume_id: csi.volumeHandle,
          staging_target_path: globalmount,
          volume_capability: { mount: { fs_type: csi.fsType ?? '' }, access_mode: { mode: 'SINGLE_NODE_WRITER' } },
          volume_context: csi.volumeAttributes ?? {},
        },
        withDeadline(),
        done,
      ),
    );
  } finally {
    plugin.close();
  }
  expect(staged(node, pv)).toBe(true);

  // The claim deleted: refused while staged, the PV and the data kept.
  await work.deleteClaim('st-forgot');
  expect(await eventOn(pvName, 'VolumeFailedDelete')).toMatch(/is staged at .*globalmount; unstage it first/);
  expect(await pvExists(pvName)).toBe(true);
  expect(fs.existsSync(volumeDir(node, pv))).toBe(true);

  // docs/operations.md, "A deletion refused: staged": a Retain PV of the same volume, a claim bound to it, a Pod on
  // the node; the Pod deleted, kubelet unstages; the refused deletion goes through at its next retry.
  const rescue = `${pvName}-unstage`;
  await cluster.api.create('/api/v1/persistentvolumes', {
    metadata: { name: rescue },
    spec: {
      capacity: pv.spec?.capacity,
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Retain',
      storageClassName: '',
      csi,
      nodeAffinity: pv.spec?.nodeAffinity,
    },
  });
  await cluster.api.create(`/api/v1/namespaces/${APP_NAMESPACE}/persistentvolumeclaims`, {
    metadata: { name: 'st-unstage' },
    spec: {
      accessModes: ['ReadWriteOnce'],
      storageClassName: '',
      volumeName: rescue,
      resources: { requests: { storage: pv.spec?.capacity?.storage ?? '64Mi' } },
    },
  });
  await work.pod('st-unstage', 'st-unstage', { node: node.name, script: 'cat /data/f' });
  await work.waitRunning('st-unstage', 120_000);
  await work.deletePod('st-unstage');
  await work.waitGone(`/api/v1/persistentvolumes/${pvName}`, `PV ${pvName}`, 180_000);
  expect(fs.existsSync(volumeDir(node, pv))).toBe(false);
  expect(node.mountinfo()).not.toContain(digest);
  await work.deleteClaim('st-unstage');
  await cluster.api.delete(`/api/v1/persistentvolumes/${rescue}`);
  await work.waitGone(`/api/v1/persistentvolumes/${rescue}`, `PV ${rescue}`);
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
