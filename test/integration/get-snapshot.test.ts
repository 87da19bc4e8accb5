import { call, withDeadline, type CsiClients } from '../../csi/client';
import type { ControllerGetCapabilitiesResponse__Output } from '../../csi/generated/csi/v1/ControllerGetCapabilitiesResponse';
import { formatSnapshotId, parseSnapshotId } from '../../common/names';
import { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { createSnapshot, deleteSnapshot, getSnapshot, listSnapshots } from '../support/snapshot-requests';

function capabilities(clients: CsiClients) {
  return call<ControllerGetCapabilitiesResponse__Output>((done) =>
    clients.controller.ControllerGetCapabilities({}, withDeadline(5_000), done),
  ).then((answer) => answer.capabilities.map((capability) => capability.rpc?.type));
}

/** The error a call failed with, as code and message (a resolved call fails the test). */
async function failure(answer: Promise<unknown>): Promise<{ code: string; details: string }> {
  const code = await codeOf(answer);
  const details = await answer.then(
    () => '',
    (error: { details?: string }) => error.details ?? '',
  );
  return { code, details };
}

/**
 * GetSnapshot (CSI v1.12, alpha) through CSI, a real node agent on a dir pool and the real Temporal dev server: it
 * answers what ListSnapshots by snapshot_id answers, from the snapshot's own node, and a node that does not answer
 * is UNAVAILABLE, never NOT_FOUND.
 */
describe('GetSnapshot', () => {
  const cluster = new TestCluster('get-snapshot');
  afterAll(() => cluster.teardown());

  it('is advertised (GET_SNAPSHOT) and served only with --snapshots', async () => {
    const without = cluster.csi((await cluster.startController('plain')).endpoint);
    expect(await capabilities(without)).not.toContain('GET_SNAPSHOT');
    const someId = formatSnapshotId({ nodeId: 'node-1', poolIdPrefix: '0123456789abcdef', key: 'a'.repeat(32) });
    expect(await codeOf(getSnapshot(without, someId))).toBe('UNIMPLEMENTED');
  });

  it('answers found, not found, malformed, and a silent node as UNAVAILABLE until it is back', async () => {
    const node = await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    expect(await capabilities(clients)).toContain('GET_SNAPSHOT');
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-1', 64 * MiB, onNode('node-1'))));
    const made = (await retryLikeCo(() => createSnapshot(clients, 'snap-1', volume.volume!.volume_id))).snapshot!;

    // Found: the snapshot as CreateSnapshot and ListSnapshots by ID give it.
    const found = (await getSnapshot(clients, made.snapshot_id)).snapshot;
    expect(found).toEqual(made);
    const listed = await listSnapshots(clients, { snapshot_id: made.snapshot_id });
    expect(listed.entries.map((entry) => entry.snapshot)).toEqual([found]);

    // Not found: an ID of this node and pool that names no snapshot.
    const parts = parseSnapshotId(made.snapshot_id)!;
    const never = formatSnapshotId({ ...parts, key: 'f'.repeat(32) });
    expect(await failure(getSnapshot(clients, never))).toEqual({
      code: 'NOT_FOUND',
      details: `snapshot ${never} is not in node node-1's pool: it was deleted (or its pool replaced)`,
    });

    // Malformed: NOT_FOUND (the spec's one error), saying the driver never issued it; a missing ID is INVALID_ARGUMENT.
    expect(await failure(getSnapshot(clients, 'no-such-snapshot'))).toEqual({
      code: 'NOT_FOUND',
      details: expect.stringContaining('snapshot no-such-snapshot was not issued by this driver'),
    });
    expect(await failure(getSnapshot(clients, volume.volume!.volume_id))).toMatchObject({ code: 'NOT_FOUND' });
    expect(await failure(getSnapshot(clients, ''))).toEqual({
      code: 'INVALID_ARGUMENT',
      details: 'snapshot_id is required',
    });

    // Node down: its silence is no answer about the snapshot.
    await node.stop();
    const silent = await failure(getSnapshot(clients, made.snapshot_id));
    expect(silent).toEqual({
      code: 'UNAVAILABLE',
      details: 'node node-1 holds the snapshots asked for and did not answer; ask again once it is back',
    });
    await cluster.startNode('node-1');
    expect((await getSnapshot(clients, made.snapshot_id)).snapshot).toEqual(made);

    // Deleted: NOT_FOUND.
    await retryLikeCo(() => deleteSnapshot(clients, made.snapshot_id));
    expect(await codeOf(getSnapshot(clients, made.snapshot_id))).toBe('NOT_FOUND');
  });
});
