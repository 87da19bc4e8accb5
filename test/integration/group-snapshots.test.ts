import * as grpc from '@grpc/grpc-js';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { call, withDeadline, type CsiClients } from '../../csi/client';
import type { CreateVolumeGroupSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateVolumeGroupSnapshotResponse';
import type { GetVolumeGroupSnapshotResponse__Output } from '../../csi/generated/csi/v1/GetVolumeGroupSnapshotResponse';
import type { GetPluginCapabilitiesResponse__Output } from '../../csi/generated/csi/v1/GetPluginCapabilitiesResponse';
import type { GroupControllerGetCapabilitiesResponse__Output } from '../../csi/generated/csi/v1/GroupControllerGetCapabilitiesResponse';
import type { GroupControllerClient } from '../../csi/generated/csi/v1/GroupController';
import { parseEndpoint } from '../../csi/endpoint';
import { csiPackage } from '../../csi/proto';
import { parseGroupSnapshotId, parseSnapshotId } from '../../common/names';
import { forgetNode } from '../../operations/forget-node';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { eventually } from '../support/eventually';
import { CopyGate, isAlive } from '../support/copy-gate';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { deleteSnapshot, listSnapshots } from '../support/snapshot-requests';
import { isFrozen, mountPoolFilesystem, releaseMountsUnder } from '../unit/storage/mount-helpers';
import { kubeletPaths, nodeRpcs } from './node-helpers';

/**
 * Group snapshots (CSI GroupController, docs/snapshots.md "Group snapshots") through the whole driver: a controller
 * with --snapshots, node agents on loop pools made on an XFS with reflinks (a real loop device each), real gRPC over
 * unix sockets and the test run's Temporal dev server.
 */

function groupClient(endpoint: string): GroupControllerClient {
  return new (csiPackage().GroupController)(parseEndpoint(endpoint).address, grpc.credentials.createInsecure());
}

function createGroup(group: GroupControllerClient, name: string, ids: string[], timeoutMs = 15_000) {
  return call<CreateVolumeGroupSnapshotResponse__Output>((done) =>
    group.CreateVolumeGroupSnapshot({ name, source_volume_ids: ids }, withDeadline(timeoutMs), done),
  );
}

function deleteGroup(group: GroupControllerClient, groupId: string, snapshotIds: string[], timeoutMs = 15_000) {
  return call<object>((done) =>
    group.DeleteVolumeGroupSnapshot(
      { group_snapshot_id: groupId, snapshot_ids: snapshotIds },
      withDeadline(timeoutMs),
      done,
    ),
  );
}

function getGroup(group: GroupControllerClient, groupId: string, snapshotIds: string[] = []) {
  return call<GetVolumeGroupSnapshotResponse__Output>((done) =>
    group.GetVolumeGroupSnapshot({ group_snapshot_id: groupId, snapshot_ids: snapshotIds }, withDeadline(15_000), done),
  );
}

/** CreateVolumeGroupSnapshot asked again, as csi-snapshotter does, while it answers ABORTED. */
function createGroupUntilReady(group: GroupControllerClient, name: string, ids: string[], totalMs = 120_000) {
  return retryLikeCo(() => createGroup(group, name, ids), totalMs);
}

/** The pool's own view: snapshot copies, their journal, and freeze records, read from disk. */
function poolState(cluster: TestCluster, nodeId: string) {
  const pool = cluster.pool(nodeId);
  const list = (dir: string) =>
    fs.existsSync(path.join(pool, dir)) ? fs.readdirSync(path.join(pool, dir)).sort() : [];
  return { data: list('snapshots/data'), journal: list('snapshots/journal'), frozen: list('frozen') };
}

function sha(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** A loop pool on its own XFS with reflinks, mounted where the cluster keeps the node's pool. */
function reflinkPool(cluster: TestCluster, nodeId: string): void {
  mountPoolFilesystem('xfs-reflink', path.join(cluster.root, `${nodeId}.img`), cluster.pool(nodeId), 2 * 1024 * MiB);
}

describe('group snapshots of loop volumes on an XFS pool with reflinks', () => {
  const cluster = new TestCluster('groupsnap');
  const gate = new CopyGate(path.join(cluster.root, 'gate'));
  const staged: string[] = [];
  const volumes: string[] = [];
  const nodeOptions = { backend: 'loop' as const, capacity: '1536Mi' };
  let clients: CsiClients;
  let group: GroupControllerClient;
  let controllerEndpoint: string;
  const nodes = new Map<string, ManagedProcess>();
  const startNode = async (nodeId: string, env?: NodeJS.ProcessEnv) => {
    const node = await cluster.startNode(nodeId, { ...nodeOptions, ...(env && { env }) });
    nodes.set(nodeId, node);
    return node;
  };
  const stopNode = async (nodeId: string) => nodes.get(nodeId)?.stop();
  afterAll(async () => {
    gate.open();
    for (const pid of gate.started()) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    group?.close();
    // The agents hold their pools open: stopped before the pools' filesystems are unmounted.
    for (const node of nodes.values()) await node.stop();
    for (const staging of staged) spawnSync('fsfreeze', ['--unfreeze', staging]);
    releaseMountsUnder(cluster.root);
    await cluster.teardown();
  });

  beforeAll(async () => {
    reflinkPool(cluster, 'node-1');
    reflinkPool(cluster, 'node-2');
    controllerEndpoint = (await cluster.startController('controller', ['--snapshots'])).endpoint;
    clients = cluster.csi(controllerEndpoint);
    group = groupClient(controllerEndpoint);
    await startNode('node-1');
    await startNode('node-2');
    for (const name of ['db-data', 'db-wal', 'db-index']) {
      const made = await retryLikeCo(() => createVolume(clients, createRequest(name, 64 * MiB, onNode('node-1'))));
      volumes.push(made.volume!.volume_id);
    }
  });

  it('advertises the GroupController, and makes three members of one instant that restore to the data', async () => {
    const plugin = await call<GetPluginCapabilitiesResponse__Output>((done) =>
      clients.identity.GetPluginCapabilities({}, withDeadline(), done),
    );
    expect(plugin.capabilities.map((c) => c.service?.type)).toContain('GROUP_CONTROLLER_SERVICE');
    const caps = await call<GroupControllerGetCapabilitiesResponse__Output>((done) =>
      group.GroupControllerGetCapabilities({}, withDeadline(), done),
    );
    expect(caps.capabilities.map((c) => c.rpc?.type)).toEqual(['CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT']);

    const node = nodeRpcs(cluster.csi(`unix://${path.join(cluster.root, 'node-1.sock')}`));
    const before = new Map<string, string>();
    for (const volumeId of volumes) {
      const { staging } = kubeletPaths(cluster, volumeId);
      await node.stage(volumeId, staging);
      staged.push(staging);
      const file = path.join(staging, 'data');
      fs.writeFileSync(file, `${volumeId}\n`.repeat(50_000));
      before.set(volumeId, sha(file));
    }
    // Written without a sync: only the freeze before each copy flushes it into the image.
    const answer = await createGroupUntilReady(group, 'group-1', volumes);
    const made = answer.group_snapshot!;
    expect(parseGroupSnapshotId(made.group_snapshot_id)?.nodeId).toBe('node-1');
    expect(made.ready_to_use).toBe(true);
    expect(made.snapshots.map((s) => s.source_volume_id).sort()).toEqual([...volumes].sort());
    for (const snapshot of made.snapshots) {
      expect(snapshot).toMatchObject({ ready_to_use: true, group_snapshot_id: made.group_snapshot_id });
    }
    expect(poolState(cluster, 'node-1')).toMatchObject({ journal: [], frozen: [] });
    for (const staging of staged) expect(isFrozen(staging)).toBe(false);
    // What the workload writes after the snapshot is not in it.
    for (const staging of staged) fs.writeFileSync(path.join(staging, 'data'), 'after the snapshot');

    for (const snapshot of made.snapshots) {
      const restored = await retryLikeCo(() =>
        createVolume(
          clients,
          createRequest(`restore-${parseSnapshotId(snapshot.snapshot_id)!.key}`, 64 * MiB, {
            volume_content_source: { snapshot: { snapshot_id: snapshot.snapshot_id } },
          }),
        ),
      );
      const restoredId = restored.volume!.volume_id;
      const { staging } = kubeletPaths(cluster, restoredId);
      await node.stage(restoredId, staging);
      staged.push(staging);
      expect(sha(path.join(staging, 'data'))).toBe(before.get(snapshot.source_volume_id));
    }

    // The same name and volumes (in another order) attach to the group made; other volumes: ALREADY_EXISTS.
    const again = await createGroup(group, 'group-1', [...volumes].reverse());
    expect(again.group_snapshot!.group_snapshot_id).toBe(made.group_snapshot_id);
    const other = createGroup(group, 'group-1', volumes.slice(0, 2));
    await expect(other).rejects.toMatchObject({ code: grpc.status.ALREADY_EXISTS });
    await expect(other).rejects.toThrow(/already exists of volumes/);

    // A member is a snapshot like any other to list and get, naming its group, but deleted with the group only.
    const member = made.snapshots[0]!.snapshot_id;
    const listed = await listSnapshots(clients, { snapshot_id: member });
    expect(listed.entries[0]?.snapshot?.group_snapshot_id).toBe(made.group_snapshot_id);
    const alone = deleteSnapshot(clients, member);
    await expect(alone).rejects.toMatchObject({ code: grpc.status.FAILED_PRECONDITION });
    await expect(alone).rejects.toThrow(/member of group snapshot .* deleted with it only/);
    expect(poolState(cluster, 'node-1').data).toHaveLength(3);

    const ids = made.snapshots.map((s) => s.snapshot_id);
    const got = await getGroup(group, made.group_snapshot_id, ids);
    expect(got.group_snapshot!.snapshots.map((s) => s.snapshot_id).sort()).toEqual([...ids].sort());
    expect(await codeOf(getGroup(group, made.group_snapshot_id, ids.slice(1)))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(deleteGroup(group, made.group_snapshot_id, ids.slice(1)))).toBe('INVALID_ARGUMENT');
    expect(poolState(cluster, 'node-1').data).toHaveLength(3);

    await deleteGroup(group, made.group_snapshot_id, ids);
    expect(poolState(cluster, 'node-1')).toEqual({ data: [], journal: [], frozen: [] });
    expect(await codeOf(getGroup(group, made.group_snapshot_id))).toBe('NOT_FOUND');
    await deleteGroup(group, made.group_snapshot_id, ids); // idempotent
  });

  it('refuses volumes of two nodes, naming both, and creates nothing', async () => {
    const elsewhere = await retryLikeCo(() =>
      createVolume(clients, createRequest('other', 64 * MiB, onNode('node-2'))),
    );
    const answer = createGroup(group, 'group-2', [volumes[0]!, elsewhere.volume!.volume_id]);
    await expect(answer).rejects.toMatchObject({ code: grpc.status.FAILED_PRECONDITION });
    await expect(answer).rejects.toThrow(/volumes of one node.*node-1, node-2/);
    expect(poolState(cluster, 'node-1').data).toEqual([]);
    expect(poolState(cluster, 'node-2').data).toEqual([]);
  });

  it('answers bad input precisely, creating nothing', async () => {
    expect(await codeOf(createGroup(group, 'bad-1', []))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(createGroup(group, 'bad-2', [volumes[0]!, volumes[0]!]))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(createGroup(group, '', volumes))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(createGroup(group, 'bad-3', [volumes[0]!, 'not-a-volume']))).toBe('NOT_FOUND');
    // Well formed, on node-1's pool, but no such volume: the node says so, and nothing of the group is made.
    const unknown = volumes[0]!.replace(/_[0-9a-f]{32}$/, `_${'0'.repeat(32)}`);
    const missing = createGroup(group, 'bad-4', [volumes[0]!, unknown]);
    await expect(missing).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    await expect(missing).rejects.toThrow(/does not exist/);
    expect(poolState(cluster, 'node-1')).toEqual({ data: [], journal: [], frozen: [] });
    expect(await codeOf(getGroup(group, 'g1_nonsense'))).toBe('NOT_FOUND');
    expect(await codeOf(getGroup(group, ''))).toBe('INVALID_ARGUMENT');
    await deleteGroup(group, 'g1_nonsense', []); // an ID this driver could not have issued: OK
    expect(await codeOf(deleteGroup(group, '', []))).toBe('INVALID_ARGUMENT');
  });

  it('waits for its node: created and deleted only once the node returns', async () => {
    await stopNode('node-1');
    await cluster.untilOffline('node-1');
    const waiting = createGroup(group, 'group-3', volumes, 5_000);
    await expect(waiting).rejects.toMatchObject({ code: grpc.status.ABORTED });
    await expect(waiting).rejects.toThrow(/node-1/);
    await startNode('node-1');
    const made = (await createGroupUntilReady(group, 'group-3', volumes)).group_snapshot!;
    expect(poolState(cluster, 'node-1').data).toHaveLength(3);

    await stopNode('node-1');
    const ids = made.snapshots.map((s) => s.snapshot_id);
    const deletion = deleteGroup(group, made.group_snapshot_id, ids, 5_000);
    await expect(deletion).rejects.toMatchObject({ code: grpc.status.ABORTED });
    await expect(deletion).rejects.toThrow(/group snapshot deletion .* node node-1/);
    expect(poolState(cluster, 'node-1').data).toHaveLength(3);
    await startNode('node-1');
    await retryLikeCo(() => deleteGroup(group, made.group_snapshot_id, ids));
    expect(poolState(cluster, 'node-1')).toEqual({ data: [], journal: [], frozen: [] });
  });

  it('finishes a group whose agent was killed with its members frozen, thawing them, leaking nothing', async () => {
    await stopNode('node-1');
    const doomed = await startNode('node-1', gate.env());
    const waiting = createGroup(group, 'group-4', volumes, 5_000);
    await expect(waiting).rejects.toMatchObject({ code: grpc.status.ABORTED });
    const [copy] = await gate.untilStarted(1);
    for (const staging of staged.slice(0, 3)) expect(isFrozen(staging)).toBe(true);
    await doomed.kill('SIGKILL');
    process.kill(copy!, 'SIGKILL');
    expect(poolState(cluster, 'node-1').frozen).toHaveLength(3);

    gate.open();
    await startNode('node-1');
    const made = (await createGroupUntilReady(group, 'group-4', volumes)).group_snapshot!;
    const keys = made.snapshots.map((s) => parseSnapshotId(s.snapshot_id)!.key).sort();
    expect(poolState(cluster, 'node-1')).toEqual({ data: keys, journal: [], frozen: [] });
    for (const staging of staged.slice(0, 3)) expect(isFrozen(staging)).toBe(false);
  });

  it('on a node forgotten for good: the deletion answers OK, and the members go when the node returns', async () => {
    const elsewhere = await retryLikeCo(() =>
      createVolume(clients, createRequest('forgotten-1', 64 * MiB, onNode('node-2'))),
    );
    const made = (await createGroupUntilReady(group, 'group-5', [elsewhere.volume!.volume_id])).group_snapshot!;
    const ids = made.snapshots.map((s) => s.snapshot_id);
    expect(poolState(cluster, 'node-2').data).toHaveLength(1);
    await stopNode('node-2');
    await cluster.untilOffline('node-2');
    await forgetNode(await cluster.temporal(), cluster.driverName, 'node-2', 'the machine is gone');

    const got = getGroup(group, made.group_snapshot_id);
    await expect(got).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    await expect(got).rejects.toThrow(/node-2, forgotten for good \(the machine is gone\)/);
    await retryLikeCo(() => deleteGroup(group, made.group_snapshot_id, ids));
    expect(poolState(cluster, 'node-2').data).toHaveLength(1); // written off, not deleted: the node is away
    await startNode('node-2'); // the same pool returns: its record deletes the member written off
    await eventually('the written-off member deleted', () => poolState(cluster, 'node-2').data.length === 0, 60_000);
  });
});
