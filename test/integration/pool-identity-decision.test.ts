import fs from 'node:fs';
import path from 'node:path';
import type { CsiClients } from '../../csi/client';
import { nodeRecordWorkflowId, NodeIdKey, parseSnapshotId, parseVolumeId, poolIdPrefix } from '../../common/names';
import { TestCluster, probe } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { createSnapshotUntilReady, deleteSnapshot } from '../support/snapshot-requests';
import { eventually } from '../support/eventually';
import { nodeRpcs } from './node-helpers';

/**
 * After a reboot the pool's disk may not be mounted yet. A node whose record remembers a pool must not make a
 * new one on the empty directory (deletions would answer "pool replaced", new volumes would land on the root
 * filesystem): it waits, and opens the real pool once the disk is there. A wiped pool is replaced only when the
 * operator names the identity that is gone (--accept-new-pool); then the waiting deletions end.
 */
jest.setTimeout(240_000);

const cluster = new TestCluster('pool-gate');
let controller: CsiClients;

beforeAll(async () => {
  controller = cluster.csi((await cluster.startController()).endpoint);
});
afterAll(() => cluster.teardown());

const identityFile = (nodeId: string) => path.join(cluster.pool(nodeId), 'pool.json');
const poolIdentity = (nodeId: string) =>
  JSON.parse(fs.readFileSync(identityFile(nodeId), 'utf8')) as { poolId: string; replaces?: string };
const logOf = (nodeId: string) => fs.readFileSync(cluster.log(nodeId), 'utf8');

/** A node with one volume whose deletion waits for it: the agent is down and its record remembers its pool. */
async function nodeWithWaitingDeletion(nodeId: string): Promise<{ volumeId: string; oldPool: string }> {
  const agent = await cluster.startNode(nodeId);
  const answer = await retryLikeCo(() =>
    createVolume(controller, createRequest(`pvc-${nodeId}`, 64 * MiB, onNode(nodeId))),
  );
  const volumeId = answer.volume!.volume_id;
  const oldPool = poolIdentity(nodeId).poolId;
  await agent.stop();
  expect(await codeOf(deleteVolume(controller, volumeId, 10_000))).toBe('ABORTED');
  return { volumeId, oldPool };
}

it('makes no identity on an empty pool directory its record does not know, and opens the disk once it is mounted', async () => {
  const { volumeId, oldPool } = await nodeWithWaitingDeletion('node-1');
  // The reboot: the disk is not mounted yet, the directory is empty.
  const disk = `${cluster.pool('node-1')}.disk`;
  fs.renameSync(cluster.pool('node-1'), disk);
  fs.mkdirSync(cluster.pool('node-1'));

  const agent = await cluster.startNode('node-1', { waitReady: false });
  const clients = cluster.csi(agent.endpoint);
  await eventually('the refusal is logged', () => logOf('node-1').includes(`--accept-new-pool=${oldPool}`));
  expect(logOf('node-1')).toContain(`the record of node node-1 remembers pool ${oldPool}`);
  expect(fs.existsSync(identityFile('node-1'))).toBe(false);
  expect(await probe(clients)).toBe(false);
  expect(await codeOf(deleteVolume(controller, volumeId, 10_000))).toBe('ABORTED');
  expect(agent.child.exitCode).toBeNull();
  // The health RPCs say it, with the gate's own words (what to mount where, or which flag decides).
  const rpcs = nodeRpcs(clients);
  const refusal = expect.stringMatching(
    new RegExp(`^node node-1: pool .* has no pool identity.*mount it there.*--accept-new-pool=${oldPool}`),
  );
  expect(await rpcs.storageHealth()).toEqual([
    { status: 'STORAGE_UNREACHABLE', reason: 'PoolRefused', message: refusal, volume_capability: null },
  ]);
  expect(await rpcs.volumeHealth(volumeId)).toEqual([
    { status: 'INACCESSIBLE', reason: 'PoolRefused', message: refusal },
  ]);

  // The disk is mounted: the agent finds its pool and the deletion ends for real.
  fs.rmdirSync(cluster.pool('node-1'));
  fs.renameSync(disk, cluster.pool('node-1'));
  await eventually('ready on the real pool', async () => (await probe(clients)) === true, 90_000);
  expect(poolIdentity('node-1').poolId).toBe(oldPool);
  expect(await rpcs.storageHealth()).toEqual([]);
  await retryLikeCo(() => deleteVolume(controller, volumeId));
  expect(cluster.volumesOnDisk('node-1')).not.toContain(parseVolumeId(volumeId)!.key);
  // Its pool is back and says the volume is gone: no health for it, the spec's NOT_FOUND.
  expect(await codeOf(rpcs.volumeHealth(volumeId))).toBe('NOT_FOUND');
});

it('replaces a wiped pool only when --accept-new-pool names the identity that is gone', async () => {
  const { volumeId, oldPool } = await nodeWithWaitingDeletion('node-2');
  fs.rmSync(cluster.pool('node-2'), { recursive: true });
  fs.mkdirSync(cluster.pool('node-2'));

  // A decision that names another pool decides nothing.
  const wrong = '0123abcd-0000-4000-8000-000000000000';
  const refused = await cluster.startNode('node-2', { waitReady: false, extra: [`--accept-new-pool=${wrong}`] });
  await eventually('the refusal is logged', () => logOf('node-2').includes(`--accept-new-pool names ${wrong}`));
  expect(fs.existsSync(identityFile('node-2'))).toBe(false);
  await refused.stop();

  // Named by the 16 hex digits its volume IDs carry.
  const prefix = parseVolumeId(volumeId)!.poolIdPrefix;
  const agent = await cluster.startNode('node-2', { extra: [`--accept-new-pool=${prefix}`] });
  const made = poolIdentity('node-2');
  expect(made.poolId).not.toBe(oldPool);
  expect(made.replaces).toBe(oldPool);
  expect(logOf('node-2')).toMatch(new RegExp(`pool identity decision: a new pool replaces pool ${oldPool}`));
  // The waiting deletion ends: the node's own pool says the volume's pool was replaced.
  await retryLikeCo(() => deleteVolume(controller, volumeId));
  const next = await retryLikeCo(() => createVolume(controller, createRequest('pvc-next', 64 * MiB, onNode('node-2'))));
  expect(parseVolumeId(next.volume!.volume_id)!.poolIdPrefix).toBe(poolIdPrefix(made.poolId));

  // The decision is kept with the pool: the next start needs no flag.
  await agent.stop();
  await cluster.startNode('node-2');
  expect(poolIdentity('node-2').poolId).toBe(made.poolId);
});

it('with its record lost too, the node waits on an empty directory when its waiting deletions name another pool', async () => {
  const { volumeId, oldPool } = await nodeWithWaitingDeletion('node-3');
  await loseRecord('node-3');
  const disk = `${cluster.pool('node-3')}.disk`;
  fs.renameSync(cluster.pool('node-3'), disk);
  fs.mkdirSync(cluster.pool('node-3'));

  const agent = await cluster.startNode('node-3', { waitReady: false });
  const clients = cluster.csi(agent.endpoint);
  const prefix = parseVolumeId(volumeId)!.poolIdPrefix;
  await eventually('the refusal is logged', () => logOf('node-3').includes(`--accept-new-pool=${prefix}`));
  expect(logOf('node-3')).toContain(`volume or snapshot operations of node node-3 name pool ${prefix}`);
  expect(fs.existsSync(identityFile('node-3'))).toBe(false);
  expect(await probe(clients)).toBe(false);
  // Not answered "pool replaced": the deletion still waits for the real pool.
  expect(await codeOf(deleteVolume(controller, volumeId, 10_000))).toBe('ABORTED');

  fs.rmdirSync(cluster.pool('node-3'));
  fs.renameSync(disk, cluster.pool('node-3'));
  await eventually('ready on the real pool', async () => (await probe(clients)) === true, 90_000);
  expect(poolIdentity('node-3').poolId).toBe(oldPool);
  await retryLikeCo(() => deleteVolume(controller, volumeId));
  expect(cluster.volumesOnDisk('node-3')).not.toContain(parseVolumeId(volumeId)!.key);
});

it('with its record lost too, snapshot deletions waiting for the node name its pool: no "pool replaced" on an empty directory', async () => {
  const snapshots = cluster.csi((await cluster.startController('snapshot-controller', ['--snapshots'])).endpoint);
  const agent = await cluster.startNode('node-4');
  const volume = await retryLikeCo(() =>
    createVolume(snapshots, createRequest('pvc-node-4', 64 * MiB, onNode('node-4'))),
  );
  const made = await createSnapshotUntilReady(snapshots, 'snap-node-4', volume.volume!.volume_id);
  const snapshotId = made.snapshot!.snapshot_id;
  await retryLikeCo(() => deleteVolume(snapshots, volume.volume!.volume_id));
  const copies = () => fs.readdirSync(path.join(cluster.pool('node-4'), 'snapshots', 'data'));
  const oldPool = poolIdentity('node-4').poolId;
  await agent.stop();
  expect(await codeOf(deleteSnapshot(snapshots, snapshotId, 10_000))).toBe('ABORTED');
  // Long ago, retention removed the volume's operations (they name the pool too); only the snapshot deletion waits.
  await forgetClosedOperations('node-4');
  await loseRecord('node-4');
  const disk = `${cluster.pool('node-4')}.disk`;
  fs.renameSync(cluster.pool('node-4'), disk);
  fs.mkdirSync(cluster.pool('node-4'));

  const restarted = await cluster.startNode('node-4', { waitReady: false });
  const clients = cluster.csi(restarted.endpoint);
  const prefix = parseSnapshotId(snapshotId)!.poolIdPrefix;
  await eventually(
    'the refusal is logged (or a new pool made)',
    () => logOf('node-4').includes(`--accept-new-pool=${prefix}`) || fs.existsSync(identityFile('node-4')),
  );
  expect(fs.existsSync(identityFile('node-4'))).toBe(false);
  expect(logOf('node-4')).toContain(`volume or snapshot operations of node node-4 name pool ${prefix}`);
  // Not answered "pool replaced" (a false deleted): the copy is on the disk that is not mounted yet.
  expect(await codeOf(deleteSnapshot(snapshots, snapshotId, 10_000))).toBe('ABORTED');

  fs.rmdirSync(cluster.pool('node-4'));
  fs.renameSync(disk, cluster.pool('node-4'));
  await eventually('ready on the real pool', async () => (await probe(clients)) === true, 90_000);
  expect(poolIdentity('node-4').poolId).toBe(oldPool);
  await retryLikeCo(() => deleteSnapshot(snapshots, snapshotId));
  expect(copies()).toEqual([]);
});

/** The record goes (an operator deleted it, or retention did once it had closed) while the disk is not mounted. */
async function loseRecord(nodeId: string): Promise<void> {
  const client = await cluster.temporal();
  // A closed record still remembers its pool in its memo until it is deleted.
  const record = client.workflow.getHandle(nodeRecordWorkflowId(cluster.driverName, nodeId));
  const { runId } = await record.describe();
  await record.terminate('test: record lost');
  await client.workflowService.deleteWorkflowExecution({
    namespace: client.options.namespace,
    workflowExecution: { workflowId: record.workflowId, runId },
  });
  await eventually('the record is gone', async () => {
    try {
      await record.describe();
      return false;
    } catch {
      return true;
    }
  });
}

/** What retention does to a node's closed operations, at once; visibility forgets them a moment later. */
async function forgetClosedOperations(nodeId: string): Promise<void> {
  const client = await cluster.temporal();
  const query = `WorkflowId STARTS_WITH "${cluster.driverName}/" AND ${NodeIdKey.name} = "${nodeId}" AND ExecutionStatus != "Running"`;
  const closed = async () => {
    const found: { workflowId: string; runId: string }[] = [];
    for await (const workflow of client.workflow.list({ query })) found.push(workflow);
    return found;
  };
  for (const { workflowId, runId } of await closed())
    await client.workflowService.deleteWorkflowExecution({
      namespace: client.options.namespace,
      workflowExecution: { workflowId, runId },
    });
  await eventually('visibility forgets the closed operations', async () => (await closed()).length === 0);
}
