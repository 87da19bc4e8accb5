import fs from 'node:fs';
import path from 'node:path';
import { call, withDeadline, type CsiClients } from '../../csi/client';
import type { CreateSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateSnapshotResponse';
import type { ListSnapshotsResponse__Output } from '../../csi/generated/csi/v1/ListSnapshotsResponse';
import type { ControllerGetCapabilitiesResponse__Output } from '../../csi/generated/csi/v1/ControllerGetCapabilitiesResponse';
import { parseSnapshotId, parseVolumeId } from '../../common/names';
import { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';

function createSnapshot(clients: CsiClients, name: string, sourceVolumeId: string, timeoutMs = 15_000) {
  return call<CreateSnapshotResponse__Output>((done) =>
    clients.controller.CreateSnapshot({ name, source_volume_id: sourceVolumeId }, withDeadline(timeoutMs), done),
  );
}

function deleteSnapshot(clients: CsiClients, snapshotId: string, timeoutMs = 15_000) {
  return call<object>((done) =>
    clients.controller.DeleteSnapshot({ snapshot_id: snapshotId }, withDeadline(timeoutMs), done),
  );
}

function listSnapshots(clients: CsiClients, request: Record<string, unknown> = {}) {
  return call<ListSnapshotsResponse__Output>((done) =>
    clients.controller.ListSnapshots(request, withDeadline(15_000), done),
  );
}

function capabilities(clients: CsiClients) {
  return call<ControllerGetCapabilitiesResponse__Output>((done) =>
    clients.controller.ControllerGetCapabilities({}, withDeadline(5_000), done),
  ).then((answer) => answer.capabilities.map((capability) => capability.rpc?.type));
}

/**
 * Snapshots end to end through CSI, real node agents on dir pools and the real Temporal dev server: the copy is
 * made on the volume's node, outlives the volume, restores into a new volume, and a deletion whose node is down
 * waits (ABORTED, naming the node and the wait) until the node's pool confirms the copy gone.
 */
describe('snapshots', () => {
  const cluster = new TestCluster('snapshots');
  afterAll(() => cluster.teardown());

  it('are advertised only with --snapshots', async () => {
    const without = cluster.csi((await cluster.startController('plain')).endpoint);
    expect(await capabilities(without)).not.toContain('CREATE_DELETE_SNAPSHOT');
    expect(await codeOf(createSnapshot(without, 'snap-x', 'v1_node-1_0123456789abcdef_' + 'a'.repeat(32)))).toBe(
      'UNIMPLEMENTED',
    );
  });

  it('snapshot a volume on its node, restore it, list it and delete it; the copy outlives its volume', async () => {
    await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    expect(await capabilities(clients)).toEqual(
      expect.arrayContaining(['CREATE_DELETE_SNAPSHOT', 'LIST_SNAPSHOTS', 'CLONE_VOLUME']),
    );
    const source = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-source', 64 * MiB, onNode('node-1'))),
    );
    const sourceId = source.volume!.volume_id;
    const sourceDir = path.join(cluster.pool('node-1'), 'volumes', parseVolumeId(sourceId)!.key);
    fs.writeFileSync(path.join(sourceDir, 'data'), 'before the snapshot');

    const started = Date.now();
    const made = await retryLikeCo(() => createSnapshot(clients, 'snap-1', sourceId));
    console.log(`CreateSnapshot of a 64 MiB dir volume: ${Date.now() - started} ms`);
    const snapshot = made.snapshot!;
    expect(snapshot).toMatchObject({ source_volume_id: sourceId, size_bytes: String(64 * MiB), ready_to_use: true });
    const parts = parseSnapshotId(snapshot.snapshot_id)!;
    expect(parts).toMatchObject({ nodeId: 'node-1', poolIdPrefix: parseVolumeId(sourceId)!.poolIdPrefix });
    const copy = path.join(cluster.pool('node-1'), 'snapshots', 'data', parts.key);
    expect(fs.readFileSync(path.join(copy, 'data'), 'utf8')).toBe('before the snapshot');
    fs.writeFileSync(path.join(sourceDir, 'data'), 'after the snapshot');

    // Idempotent by name and source; the name with another source is ALREADY_EXISTS.
    expect((await createSnapshot(clients, 'snap-1', sourceId)).snapshot!.snapshot_id).toBe(snapshot.snapshot_id);
    const other = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-other', 64 * MiB, onNode('node-1'))),
    );
    expect(await codeOf(createSnapshot(clients, 'snap-1', other.volume!.volume_id))).toBe('ALREADY_EXISTS');

    const byId = await listSnapshots(clients, { snapshot_id: snapshot.snapshot_id });
    expect(byId.entries.map((entry) => entry.snapshot!.snapshot_id)).toEqual([snapshot.snapshot_id]);
    const bySource = await listSnapshots(clients, { source_volume_id: sourceId });
    expect(bySource.entries.map((entry) => entry.snapshot!.snapshot_id)).toEqual([snapshot.snapshot_id]);
    expect((await listSnapshots(clients, { snapshot_id: 'no-such-snapshot' })).entries).toEqual([]);
    expect(await codeOf(listSnapshots(clients, { starting_token: 'not-a-token' }))).toBe('ABORTED');

    // The volume goes; its snapshot stays and restores into a new volume on the same node.
    await retryLikeCo(() => deleteVolume(clients, sourceId));
    expect(fs.existsSync(sourceDir)).toBe(false);
    const restoreStarted = Date.now();
    const restored = await retryLikeCo(() =>
      createVolume(
        clients,
        createRequest('pvc-restored', 64 * MiB, {
          volume_content_source: { snapshot: { snapshot_id: snapshot.snapshot_id } },
        }),
      ),
    );
    console.log(`CreateVolume from that snapshot: ${Date.now() - restoreStarted} ms`);
    expect(restored.volume!.accessible_topology).toEqual([{ segments: { 'topology.durable-csi.io/node': 'node-1' } }]);
    const restoredDir = path.join(cluster.pool('node-1'), 'volumes', parseVolumeId(restored.volume!.volume_id)!.key);
    expect(fs.readFileSync(path.join(restoredDir, 'data'), 'utf8')).toBe('before the snapshot');
    expect(
      await codeOf(
        createVolume(
          clients,
          createRequest('pvc-elsewhere', 64 * MiB, {
            volume_content_source: { snapshot: { snapshot_id: snapshot.snapshot_id } },
            ...onNode('node-2'),
          }),
        ),
      ),
    ).toBe('RESOURCE_EXHAUSTED');

    await retryLikeCo(() => deleteSnapshot(clients, snapshot.snapshot_id));
    expect(fs.existsSync(copy)).toBe(false);
    await expect(deleteSnapshot(clients, snapshot.snapshot_id)).resolves.toEqual({});
    await expect(deleteSnapshot(clients, 'never-issued')).resolves.toEqual({});
    expect(await codeOf(deleteSnapshot(clients, ''))).toBe('INVALID_ARGUMENT');
  });

  it('waits to delete a snapshot whose node is stopped, then completes once the node is back', async () => {
    const node = await cluster.startNode('node-2');
    const clients = cluster.csi((await cluster.startController('controller-2', ['--snapshots'])).endpoint);
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-2', 64 * MiB, onNode('node-2'))));
    const made = await retryLikeCo(() => createSnapshot(clients, 'snap-2', volume.volume!.volume_id));
    const snapshotId = made.snapshot!.snapshot_id;
    const copy = path.join(cluster.pool('node-2'), 'snapshots', 'data', parseSnapshotId(snapshotId)!.key);
    expect(fs.existsSync(copy)).toBe(true);

    await node.stop();
    const waiting = deleteSnapshot(clients, snapshotId, 6_000);
    await expect(waiting).rejects.toMatchObject({ code: 10 }); // ABORTED: the VolumeSnapshotContent stays
    await waiting.catch((error: Error) => {
      expect(error.message).toMatch(/snapshot deletion of s1_node-2_.* has waited \d+s for node node-2/);
    });
    expect(fs.existsSync(copy)).toBe(true);
    // Its node silent, the snapshot is not "gone" to a lookup either: UNAVAILABLE, not an empty list.
    expect(await codeOf(listSnapshots(clients, { snapshot_id: snapshotId }))).toBe('UNAVAILABLE');

    await cluster.startNode('node-2');
    await retryLikeCo(() => deleteSnapshot(clients, snapshotId));
    expect(fs.existsSync(copy)).toBe(false);
    expect(fs.readdirSync(path.join(cluster.pool('node-2'), 'snapshots', 'journal'))).toEqual([]);
  });
});
