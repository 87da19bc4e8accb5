import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { V1PersistentVolume, V1PersistentVolumeClaim, V1PersistentVolumeList } from '@kubernetes/client-node';
import { temporal as temporal_api } from '@temporalio/proto';
import { moveWorkflowId, parseVolumeId } from '../../common/names';
import { findProjectRoot } from '../../common/project-root';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { MiB } from '../support/csi-requests';
import { eventually } from '../support/eventually';
import { readNodeRecord } from '../../node-records/reads';
import { BLOCK_CAPABILITY, kubeletPaths, nodeRpcs } from '../integration/node-helpers';
import { ControlPlane } from './control-plane';
import type { KubeRest } from './kube-rest';
import { MoveHarness } from './move-harness';
import { CONTROL_PLANE_SETS, k8sTools } from './tools';

/**
 * A move's switch in Kubernetes (issue 39; kubernetes/claim-switch.ts, docs/volume-moves.md "The switch") on a real
 * kube-apiserver with the PV controller binding claims, the real Temporal dev server, a controller run with
 * --kubernetes and real agents on loop pools copying node to node on loopback. A claim with its PV on node-a is moved
 * by `volumes move --pvc`: the claim comes back under its name, with its labels and annotations, bound to a new PV that
 * names the copy on node-b; the old PV and volume are deleted; a Pod still on node-a holds the switch until it goes
 * (and the controller is killed meanwhile: another goes on).
 * A watch of the PVs all along checks the promises: every PV of the driver names a volume that exists on its node,
 * and there is always a copy. A volume in use (staged) is refused with what to stop, nothing touched.
 */
jest.setTimeout(300_000);

const plane = new ControlPlane(k8sTools(CONTROL_PLANE_SETS), fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-k8s-')), []);
const cluster = new TestCluster('move-claims');
let api: KubeRest;
const harness = new MoveHarness(() => api, cluster, 'durable-csi-loop-move');
const { namespace: NAMESPACE, size: SIZE } = harness;
const image = (volumeId: string) => harness.image(volumeId);
const sha256 = (file: string) => harness.sha256(file);
const claimPath = (name: string) => harness.claimPath(name);
const boundClaim = (name: string) => harness.boundClaim(name, controllerEndpoint);
const watchPromises = (copies: () => string[]) => harness.watchPromises(copies);
const podOnNodeA = (name: string, claimName: string) => harness.podOnNodeA(name, claimName);
const strandedPod = (name: string, claimName: string, nodeName: string) =>
  harness.strandedPod(name, claimName, nodeName);
const POOL_CAPACITY = 512 * MiB;
const ports = new Map<string, number>();
const agents = new Map<string, ManagedProcess>();
let controllerEndpoint = '';
let controller: ManagedProcess | undefined;

const startAgent = async (nodeId: string, failpoints?: string): Promise<ManagedProcess> => {
  if (!ports.has(nodeId)) ports.set(nodeId, await findFreePort());
  const extra = ['--transfer-port', String(ports.get(nodeId)), '--transfer-address', '127.0.0.1'];
  const capacity = `${POOL_CAPACITY / MiB}Mi`;
  const agent = await cluster.startNode(nodeId, { backend: 'loop', capacity, extra, failpoints });
  agents.set(nodeId, agent);
  return agent;
};
const cli = (...args: string[]) => harness.cli(...args);

/**
 * The replay fixtures of a move with a switch (test/replay/replay.test.ts replays them): written when the run is
 * asked to, `DURABLE_CSI_RECORD_HISTORIES=1` (record-histories.ts records the rest; these need an API server).
 */
async function recordHistory(name: string, volumeId: string): Promise<void> {
  if (process.env.DURABLE_CSI_RECORD_HISTORIES !== '1') return;
  const temporal = await cluster.temporal();
  const history = await temporal.workflow.getHandle(moveWorkflowId(cluster.driverName, volumeId)).fetchHistory();
  const fixtures = path.join(findProjectRoot(), 'test', 'fixtures', 'histories');
  fs.writeFileSync(path.join(fixtures, `${name}.pb`), temporal_api.api.history.v1.History.encode(history).finish());
}

beforeAll(async () => {
  api = await MoveHarness.startPlane(plane);
  await startAgent('node-a');
  await startAgent('node-b');
  controller = await cluster.startController('controller', ['--snapshots', '--kubernetes']);
  controllerEndpoint = controller.endpoint;
  await harness.createStorageClass();
}, 180_000);

afterAll(async () => {
  await cluster.teardown();
  api?.close();
  await plane.stop();
  if (!process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(plane.root, { recursive: true, force: true });
});

afterEach(() => harness.stopWatches());

describe('volumes move --pvc on a real API server', () => {
  it("binds the claim, under its name, to a new PV naming the copy on the target, once the old node's Pod is gone; then the old PV and volume go", async () => {
    const { volumeId, pvName, uid } = await boundClaim('data-db-0');
    const before = sha256(image(volumeId));
    const seen = [volumeId];
    const watch = watchPromises(() => seen);
    await podOnNodeA('db-0', 'data-db-0');

    const moving = cli('volumes', 'move', '--pvc', `${NAMESPACE}/data-db-0`, '--to', 'node-b', '--output', 'json');
    // The switch waits for the Pod, and says so where an operator looks.
    await harness.untilWaitingForPod(volumeId, 'db-0');
    const waiting = await api.get<V1PersistentVolumeClaim>(claimPath('data-db-0'));
    expect(waiting.metadata?.uid).toBe(uid);
    const held = await api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${pvName}`);
    expect(held.spec?.persistentVolumeReclaimPolicy).toBe('Retain');
    // The controller dies mid-switch; another takes the move on from where it stands.
    await controller!.kill('SIGKILL');
    controller = await cluster.startController('controller-2', ['--snapshots', '--kubernetes']);
    controllerEndpoint = controller.endpoint;
    await api.delete(`/api/v1/namespaces/${NAMESPACE}/pods/db-0?gracePeriodSeconds=0`);
    await expect(api.get(`/api/v1/namespaces/${NAMESPACE}/pods/db-0`)).rejects.toThrow(/404/);
    // As a StatefulSet's Pod does when the scheduler places it through the claim its controller made again while the
    // switch had the claim away: bound to node-c, where the copy is not. The switch deletes it (not started, made by a
    // controller), so that its controller makes it again where the data is.
    await eventually(
      'the claim replaced by the switch',
      async () =>
        (await api.get<V1PersistentVolumeClaim>(claimPath('data-db-0')).catch(() => undefined))?.metadata?.uid !== uid,
      60_000,
      50,
    );
    await strandedPod('db-0', 'data-db-0', 'node-c');

    const answer = await moving;
    expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
    const result = JSON.parse(answer.stdout) as {
      outcome: string;
      newVolumeId: string;
      claim: string;
      persistentVolume: string;
    };
    seen.push(result.newVolumeId);
    expect(result.outcome).toBe('moved');
    expect(result.claim).toBe(`${NAMESPACE}/data-db-0`);
    expect(parseVolumeId(result.newVolumeId)?.nodeId).toBe('node-b');

    // The claim: the same name, labels and annotations, a new object bound to the new PV.
    const claim = await api.get<V1PersistentVolumeClaim>(claimPath('data-db-0'));
    expect(claim.metadata?.uid).not.toBe(uid);
    expect(claim.metadata?.labels).toEqual({ app: 'db' });
    expect(claim.metadata?.annotations?.['example.com/owner']).toBe('team-data');
    expect(claim.spec?.volumeName).toBe(result.persistentVolume);
    expect(claim.status?.phase).toBe('Bound');
    // The new PV: the copy's ID, node-b's affinity, the old PV's reclaim policy once bound.
    const pv = await api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${result.persistentVolume}`);
    expect(pv.spec?.csi?.volumeHandle).toBe(result.newVolumeId);
    expect(pv.spec?.nodeAffinity?.required?.nodeSelectorTerms?.[0]?.matchExpressions?.[0]?.values).toEqual(['node-b']);
    expect(pv.spec?.persistentVolumeReclaimPolicy).toBe('Delete');
    expect(pv.metadata?.annotations?.['durable-csi.io/moved-from']).toBe(volumeId);
    // The old PV and volume are gone; the data is on node-b, bit for bit.
    await expect(api.get(`/api/v1/persistentvolumes/${pvName}`)).rejects.toThrow(/404/);
    expect(cluster.volumesOnDisk('node-a')).not.toContain(parseVolumeId(volumeId)!.key);
    expect(sha256(image(result.newVolumeId))).toBe(before);
    expect(await watch.stop()).toEqual([]);
    await expect(api.get(`/api/v1/namespaces/${NAMESPACE}/pods/db-0`)).rejects.toThrow(/404/);

    const described = await cli('volumes', 'describe', volumeId);
    expect(described.stdout).toMatch(/move {2}\S+ {2}COMPLETED {2}phase moved/);
    await recordHistory('move-volume-switched', volumeId);
  });

  it('refuses a volume in use on its node with what to stop, and touches nothing', async () => {
    const { volumeId, pvName, uid } = await boundClaim('data-busy-0');
    const node = nodeRpcs(cluster.csi(agents.get('node-a')!.endpoint));
    const { staging } = kubeletPaths(cluster, volumeId);
    await node.stage(volumeId, staging, BLOCK_CAPABILITY);
    try {
      const answer = await cli('volumes', 'move', volumeId, '--to', 'node-b');
      expect(answer.code).toBe(1);
      expect(answer.stderr).toMatch(
        /FailedPrecondition: the move of \S+ to node-b rolled back, the volume untouched on node-a: holding \S+ for its move: volume \w+ is in use on this node \(staged at /,
      );
      expect(answer.stderr).toContain('cordon the node');
    } finally {
      await node.unstage(volumeId, staging);
    }
    const claim = await api.get<V1PersistentVolumeClaim>(claimPath('data-busy-0'));
    expect(claim.metadata?.uid).toBe(uid);
    const pv = await api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${pvName}`);
    expect(pv.spec?.persistentVolumeReclaimPolicy).toBe('Delete');
    expect(await harness.movedPvs(volumeId)).toEqual([]);
    expect(cluster.volumesOnDisk('node-b').length).toBe(1); // only the first test's copy
    // Let go: the volume stages again.
    await node.stage(volumeId, staging, BLOCK_CAPABILITY);
    await node.unstage(volumeId, staging);
  });

  it('rolls a move cancelled during its switch back: the new PV and the copy gone, the old PV and claim as they were', async () => {
    const { volumeId, pvName, uid } = await boundClaim('data-cancel-0');
    const onB = cluster.volumesOnDisk('node-b');
    await podOnNodeA('cancel-0', 'data-cancel-0');
    const moving = cli('volumes', 'move', volumeId, '--to', 'node-b');
    await harness.untilWaitingForPod(volumeId, 'cancel-0');
    const newPvs = () => harness.movedPvs(volumeId);
    expect(await newPvs()).toHaveLength(1); // made before the claim's deletion waits
    const cancelled = await cli('volumes', 'move', volumeId, '--cancel');
    expect({ code: cancelled.code, stderr: cancelled.stderr }).toEqual({ code: 0, stderr: '' });
    expect(cancelled.stdout).toMatch(
      /^cancelled: the move of \S+ to node-b rolled back, the volume untouched on node-a: the move was cancelled/,
    );
    const answer = await moving;
    expect(answer.code).toBe(1);
    expect(answer.stderr).toMatch(/Aborted: the move of \S+ to node-b rolled back/);

    expect(await newPvs()).toEqual([]);
    const pv = await api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${pvName}`);
    expect(pv.spec?.persistentVolumeReclaimPolicy).toBe('Delete');
    expect(pv.metadata?.annotations?.['durable-csi.io/reclaim-policy-before-move']).toBeUndefined();
    expect((await api.get<V1PersistentVolumeClaim>(claimPath('data-cancel-0'))).metadata?.uid).toBe(uid);
    expect(cluster.volumesOnDisk('node-b')).toEqual(onB);
    await api.delete(`/api/v1/namespaces/${NAMESPACE}/pods/cancel-0?gracePeriodSeconds=0`);
    // Let go: the volume stages again on its node.
    const node = nodeRpcs(cluster.csi(agents.get('node-a')!.endpoint));
    const { staging } = kubeletPaths(cluster, volumeId);
    await node.stage(volumeId, staging, BLOCK_CAPABILITY);
    await node.unstage(volumeId, staging);
    await recordHistory('move-volume-cancelled', volumeId);
    const again = await cli('volumes', 'move', volumeId, '--cancel');
    expect(again.stderr).toMatch(/FailedPrecondition: the move of \S+ is not running: it ended FAILED/);
  });

  it("lists what a move terminated mid-pull left on both nodes as stranded transfers in the orphan report, never a running move's", async () => {
    type Transfer = {
      nodeId: string;
      moveKey: string;
      direction: string;
      bytesOnDisk: number;
      verified?: boolean;
      reservedBytes?: number;
    };
    const orphans = async () => {
      const answer = await cli('volumes', 'orphans', '--output', 'json');
      expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
      return JSON.parse(answer.stdout) as { strandedTransfers: Transfer[]; uncheckedNodes: string[] };
    };
    const moveStranded = () =>
      cli('volumes', 'move', '--pvc', `${NAMESPACE}/data-stranded-0`, '--to', 'node-b', '--output', 'json');
    const temporal = await cluster.temporal();
    await agents.get('node-b')!.stop();
    const doomed = await startAgent('node-b', 'move.pull-half');
    const { volumeId } = await boundClaim('data-stranded-0');
    // Data in every chunk: a pull checkpoints after the chunks it fetches, and the failpoint needs one half way.
    fs.writeFileSync(image(volumeId), randomBytes(SIZE));
    await eventually(
      'node-b live again',
      async () => (await readNodeRecord(temporal, cluster.driverName, 'node-b'))?.node?.live === true,
      60_000,
    );
    const moving = moveStranded();
    const first = await Promise.race([doomed.exited.then(() => undefined), moving]);
    if (first) throw new Error(`the move ended before its target died half way: ${first.stdout}${first.stderr}`);
    expect(doomed.child.signalCode).toBe('SIGKILL');
    const [moveKey] = fs.readdirSync(path.join(cluster.pool('node-b'), 'transfers', 'in'));
    expect(fs.readdirSync(path.join(cluster.pool('node-a'), 'transfers', 'out'))).toContain(`${moveKey}.json`);
    // Running (its target down): its offer on node-a is no orphan, and node-b, silent, is not checked.
    const whileRunning = await orphans();
    expect(whileRunning.strandedTransfers).toEqual([]);
    expect(whileRunning.uncheckedNodes).toContain('node-b');

    await temporal.workflow.getHandle(moveWorkflowId(cluster.driverName, volumeId)).terminate('stranded-transfer test');
    expect((await moving).code).not.toBe(0);
    await startAgent('node-b');
    const stranded = await eventually(
      'both halves of the terminated move listed',
      async () => {
        const found = (await orphans()).strandedTransfers;
        return found.length === 2 ? found : undefined;
      },
      60_000,
      1000,
    );
    expect(
      stranded
        .map(({ nodeId, moveKey: key, direction }) => ({ nodeId, key, direction }))
        .sort((a, b) => a.nodeId.localeCompare(b.nodeId)),
    ).toEqual([
      { nodeId: 'node-a', key: moveKey, direction: 'out' },
      { nodeId: 'node-b', key: moveKey, direction: 'in' },
    ]);
    const staged = stranded.find((transfer) => transfer.direction === 'in')!;
    expect(staged.verified).toBe(false);
    expect(staged.bytesOnDisk).toBeGreaterThanOrEqual(SIZE / 2);
    // It holds node-b's room for the volume it was to become (the reservation made before its pull), until removed.
    expect(staged.reservedBytes).toBe(SIZE);
    const roomOnB = async () => (await readNodeRecord(temporal, cluster.driverName, 'node-b'))?.node?.availableBytes;
    // Every volume on node-b here is SIZE large; the room reported lags the pool by a heartbeat (10 s at most).
    const heldRoom = POOL_CAPACITY - cluster.volumesOnDisk('node-b').length * SIZE - SIZE;
    await eventually('node-b reporting the room held', async () => (await roomOnB()) === heldRoom, 60_000);

    // As the runbook says: removed by hand on each node; the volume is moved again (the new move takes the hold over).
    fs.rmSync(path.join(cluster.pool('node-b'), 'transfers', 'in', moveKey!), { recursive: true });
    fs.rmSync(path.join(cluster.pool('node-a'), 'transfers', 'out', `${moveKey}.json`));
    expect((await orphans()).strandedTransfers).toEqual([]);
    await eventually('node-b reporting the room released', async () => (await roomOnB()) === heldRoom + SIZE, 60_000);
    const again = await moveStranded();
    expect({ code: again.code, stderr: again.code === 0 ? '' : again.stderr }).toEqual({ code: 0, stderr: '' });
  });

  it('evacuates a cordoned node (its agent killed right after a retire deleted a volume): every claim on it moved to a node with room; an uncordoned node is refused', async () => {
    const second = await boundClaim('data-db-1');
    await api.create('/api/v1/nodes', { metadata: { name: 'node-a' } });
    await api.create('/api/v1/nodes', { metadata: { name: 'node-b' } });
    const refused = await cli('nodes', 'evacuate', 'node-a');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/FailedPrecondition: node node-a is not cordoned: .*kubectl cordon node-a/);

    await api.patch('/api/v1/nodes/node-a', { spec: { unschedulable: true } });
    const onA = async () =>
      (await api.get<V1PersistentVolumeList>('/api/v1/persistentvolumes')).items
        .filter((pv) => parseVolumeId(pv.spec?.csi?.volumeHandle ?? '')?.nodeId === 'node-a')
        .map((pv) => pv.spec?.claimRef?.name)
        .sort();
    expect(await onA()).toEqual(['data-busy-0', 'data-cancel-0', 'data-db-1']); // the tests' before, and a new one
    const planned = await cli('nodes', 'evacuate', 'node-a', '--dry-run');
    expect(planned.code).toBe(0);
    expect(planned.stdout).toMatch(/default\/data-db-1 +64Mi +node-b +would move/);
    expect(await onA()).toEqual(['data-busy-0', 'data-cancel-0', 'data-db-1']);

    const before = sha256(image(second.volumeId));
    // The source dies right after a retire deleted an old volume (the PV already gone): the retry finds it gone.
    await agents.get('node-a')!.stop();
    const dying = await startAgent('node-a', 'delete.after');
    const evacuating = cli('nodes', 'evacuate', 'node-a', '--output', 'json');
    await dying.exited;
    expect(dying.child.signalCode).toBe('SIGKILL');
    await startAgent('node-a');
    const answer = await evacuating;
    expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
    const outcome = JSON.parse(answer.stdout) as { results: { volumeId: string; newVolumeId: string }[] };
    expect(outcome.results).toHaveLength(3);
    expect(await onA()).toEqual([]);
    const moved = outcome.results.find((result) => result.volumeId === second.volumeId)!;
    expect(sha256(image(moved.newVolumeId))).toBe(before);
    const claim = await api.get<V1PersistentVolumeClaim>(claimPath('data-db-1'));
    const pv = await api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${claim.spec?.volumeName}`);
    expect(pv.spec?.csi?.volumeHandle).toBe(moved.newVolumeId);
    expect(cluster.volumesOnDisk('node-a')).toEqual([]);
  });

  it('rolls a move terminated while its switch waited back on --cancel: the new PV and the copy gone, the old PV and claim as they were', async () => {
    const { volumeId, pvName, uid } = await boundClaim('data-terminated-0');
    const onB = cluster.volumesOnDisk('node-b');
    await podOnNodeA('terminated-0', 'data-terminated-0');
    const moving = cli('volumes', 'move', volumeId, '--to', 'node-b');
    await harness.untilWaitingForPod(volumeId, 'terminated-0');
    const newPvs = () => harness.movedPvs(volumeId);
    expect(await newPvs()).toHaveLength(1);
    const temporal = await cluster.temporal();
    await temporal.workflow.getHandle(moveWorkflowId(cluster.driverName, volumeId)).terminate('the test');
    expect((await moving).code).toBe(1);
    // Terminated, it undid nothing: the new PV stands and the old one is held by Retain.
    expect(await newPvs()).toHaveLength(1);
    expect(
      (await api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${pvName}`)).spec?.persistentVolumeReclaimPolicy,
    ).toBe('Retain');

    const cancelled = await cli('volumes', 'move', volumeId, '--cancel');
    expect({ code: cancelled.code, stderr: cancelled.stderr }).toEqual({ code: 0, stderr: '' });
    expect(cancelled.stdout).toMatch(
      /^cancelled: the move of \S+ to node-b rolled back, the volume untouched on node-a/,
    );
    expect(await newPvs()).toEqual([]);
    const pv = await api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${pvName}`);
    expect(pv.spec?.persistentVolumeReclaimPolicy).toBe('Delete');
    expect(pv.metadata?.annotations?.['durable-csi.io/reclaim-policy-before-move']).toBeUndefined();
    expect((await api.get<V1PersistentVolumeClaim>(claimPath('data-terminated-0'))).metadata?.uid).toBe(uid);
    expect(cluster.volumesOnDisk('node-b')).toEqual(onB);
    expect(fs.readdirSync(path.join(cluster.pool('node-b'), 'transfers', 'in'))).toEqual([]);
    await recordHistory('move-volume-terminated-rolled-back', volumeId);
    await api.delete(`/api/v1/namespaces/${NAMESPACE}/pods/terminated-0?gracePeriodSeconds=0`);
    const node = nodeRpcs(cluster.csi(agents.get('node-a')!.endpoint));
    const { staging } = kubeletPaths(cluster, volumeId);
    await node.stage(volumeId, staging, BLOCK_CAPABILITY);
    await node.unstage(volumeId, staging);
  });
});
