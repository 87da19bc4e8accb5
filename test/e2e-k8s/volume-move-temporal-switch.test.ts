import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { V1PersistentVolume, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { PhaseKey, moveWorkflowId, parseVolumeId } from '../../common/names';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster } from '../support/cluster';
import { eventually } from '../support/eventually';
import { startRunTemporal, type RunTemporal } from '../support/run-temporal';
import { useOwnTemporal } from '../support/test-temporal';
import { ControlPlane } from './control-plane';
import type { KubeRest } from './kube-rest';
import { MoveHarness } from './move-harness';
import { CONTROL_PLANE_SETS, k8sTools } from './tools';

/**
 * A move's switch in Kubernetes with the Temporal server itself SIGKILLed in it (issue 39 item 4; docs/volume-moves.md
 * "Crash at each step"): the suite runs its own dev server (volume-move-temporal.test.ts does the same for the node
 * phases, without Kubernetes) beside a real kube-apiserver with the PV controller. Temporal is killed, and started
 * again on its database, twice: while the switch waits for the old node's Pod (the new PV made, the old one set to
 * Retain), and at once when the claim has been replaced (its activity's answer may be lost: the retry reads the
 * cluster). The move ends as one never interrupted, and a watch of the API server and the pools all along finds no
 * PV naming a missing volume and always a copy.
 */
jest.setTimeout(300_000);

const plane = new ControlPlane(k8sTools(CONTROL_PLANE_SETS), fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-k8s-')), []);
const cluster = new TestCluster('move-temporal-switch');
let api: KubeRest;
const harness = new MoveHarness(() => api, cluster, 'durable-csi-loop-move');
let workDir: string;
let temporal: RunTemporal | undefined;
let restoreTemporal: (() => void) | undefined;
let controllerEndpoint = '';

beforeAll(async () => {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-move-switch-'));
  temporal = await startRunTemporal('dev', workDir, () => undefined);
  // Every process of this suite (and TestCluster's own client) talks to this server, not jest's.
  restoreTemporal = useOwnTemporal(temporal.config.address);
  api = await MoveHarness.startPlane(plane);
  for (const nodeId of ['node-a', 'node-b']) {
    const extra = ['--transfer-port', String(await findFreePort()), '--transfer-address', '127.0.0.1'];
    await cluster.startNode(nodeId, { backend: 'loop', capacity: '512Mi', extra });
  }
  controllerEndpoint = (await cluster.startController('controller', ['--kubernetes'])).endpoint;
  await harness.createStorageClass();
}, 180_000);

afterEach(() => harness.stopWatches());

afterAll(async () => {
  await cluster.teardown();
  api?.close();
  await plane.stop();
  await temporal?.stop();
  restoreTemporal?.();
  if (!process.env.DURABLE_CSI_KEEP_TEST_DATA) {
    fs.rmSync(plane.root, { recursive: true, force: true });
    if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
  }
});

it('completes a switch whose Temporal server was killed while it waited for the Pod and again as the claim was replaced', async () => {
  const { namespace } = harness;
  const { volumeId, pvName, uid } = await harness.boundClaim('data-db-0', controllerEndpoint);
  const before = harness.sha256(harness.image(volumeId));
  const seen = [volumeId];
  const watch = harness.watchPromises(() => seen);
  await harness.podOnNodeA('db-0', 'data-db-0');

  const connection = await Connection.connect({ address: temporal!.config.address });
  const phase = async () => {
    const client = new Client({ connection, namespace: 'default' });
    const handle = client.workflow.getHandle(moveWorkflowId(cluster.driverName, volumeId));
    return (await handle.describe()).typedSearchAttributes.get(PhaseKey);
  };
  const killedIn: string[] = [];
  // The first request may fail while the server is down: the second one, after the last kill, attaches.
  const first = harness.cli('volumes', 'move', volumeId, '--to', 'node-b');
  try {
    await harness.untilWaitingForPod(volumeId, 'db-0');
    killedIn.push(`${await phase()}, waiting for the Pod`);
    await temporal!.restart('SIGKILL', 0);
    // Killed while the switch waited: the new PV stands, the old one is held by Retain, the claim untouched.
    expect((await api.get<V1PersistentVolumeClaim>(harness.claimPath('data-db-0'))).metadata?.uid).toBe(uid);
    const held = await api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${pvName}`);
    expect(held.spec?.persistentVolumeReclaimPolicy).toBe('Retain');

    await api.delete(`/api/v1/namespaces/${namespace}/pods/db-0?gracePeriodSeconds=0`);
    await eventually(
      'the claim replaced by the switch',
      async () =>
        (await api.get<V1PersistentVolumeClaim>(harness.claimPath('data-db-0')).catch(() => undefined))?.metadata
          ?.uid !== uid,
      120_000,
      50,
    );
    killedIn.push(`${await phase()}, the claim replaced`);
    await temporal!.restart('SIGKILL', 0);
  } finally {
    await connection.close();
  }
  console.log(`Temporal killed in: ${killedIn.join('; ')}`);
  expect(killedIn[0]).toMatch(/^switching, /);

  await first;
  const answer = await harness.cli('volumes', 'move', volumeId, '--to', 'node-b', '--output', 'json');
  expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
  const result = JSON.parse(answer.stdout) as { outcome: string; newVolumeId: string; persistentVolume: string };
  seen.push(result.newVolumeId);
  expect(result.outcome).toBe('moved');
  expect(parseVolumeId(result.newVolumeId)?.nodeId).toBe('node-b');

  // As a move never interrupted ends: the claim, under its name with its labels, bound to the PV of the copy.
  const claim = await api.get<V1PersistentVolumeClaim>(harness.claimPath('data-db-0'));
  expect(claim.metadata?.uid).not.toBe(uid);
  expect(claim.metadata?.labels).toEqual({ app: 'db' });
  expect(claim.metadata?.annotations?.['example.com/owner']).toBe('team-data');
  expect(claim.spec?.volumeName).toBe(result.persistentVolume);
  expect(claim.status?.phase).toBe('Bound');
  const pv = await api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${result.persistentVolume}`);
  expect(pv.spec?.csi?.volumeHandle).toBe(result.newVolumeId);
  expect(pv.spec?.persistentVolumeReclaimPolicy).toBe('Delete');
  await expect(api.get(`/api/v1/persistentvolumes/${pvName}`)).rejects.toThrow(/404/);
  // One PV made by the move (a retried prepare made no second), the old volume gone, the copy bit for bit.
  expect(await harness.movedPvs(volumeId)).toHaveLength(1);
  expect(cluster.volumesOnDisk('node-a')).toEqual([]);
  expect(cluster.volumesOnDisk('node-b')).toEqual([parseVolumeId(result.newVolumeId)!.key]);
  expect(harness.sha256(harness.image(result.newVolumeId))).toBe(before);
  for (const [nodeId, dir] of [
    ['node-a', 'snapshots/data'],
    ['node-a', 'transfers/out'],
    ['node-b', 'transfers/in'],
  ] as const) {
    const full = path.join(cluster.pool(nodeId), dir);
    expect({ [`${nodeId}/${dir}`]: fs.existsSync(full) ? fs.readdirSync(full) : [] }).toEqual({
      [`${nodeId}/${dir}`]: [],
    });
  }
  expect(await watch.stop()).toEqual([]);
});
