import { call, withDeadline } from '../../csi/client';
import type { ControllerExpandVolumeResponse__Output } from '../../csi/generated/csi/v1/ControllerExpandVolumeResponse';
import { TestCluster } from '../support/cluster';
import { GiB, MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';

/** ControllerExpandVolume as a durable workflow on the volume's node, with the spec's codes. */
describe('ControllerExpandVolume', () => {
  const cluster = new TestCluster('expand');
  let clients: ReturnType<TestCluster['csi']>;
  const expand = (volumeId: string, bytes: number, timeoutMs = 15_000) =>
    call<ControllerExpandVolumeResponse__Output>((done) =>
      clients.controller.ControllerExpandVolume(
        { volume_id: volumeId, capacity_range: { required_bytes: String(bytes) } },
        withDeadline(timeoutMs),
        done,
      ),
    );

  beforeAll(async () => {
    await cluster.startNode('node-1', { capacity: '1Gi' });
    clients = cluster.csi((await cluster.startController('controller', ['--max-volume-size', '2Gi'])).endpoint);
  });
  afterAll(() => cluster.teardown());

  it('grows a volume, idempotently, and refuses what cannot be done', async () => {
    const created = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-grow', 64 * MiB, onNode('node-1'))),
    );
    const volumeId = created.volume!.volume_id;
    const grown = await retryLikeCo(() => expand(volumeId, 128 * MiB));
    expect(Number(grown.capacity_bytes)).toBe(128 * MiB);
    expect(grown.node_expansion_required).toBe(false); // a dir volume has no filesystem of its own to grow
    expect(Number((await retryLikeCo(() => expand(volumeId, 128 * MiB))).capacity_bytes)).toBe(128 * MiB);
    // Never shrinks: a smaller request answers the current size.
    expect(Number((await retryLikeCo(() => expand(volumeId, 96 * MiB))).capacity_bytes)).toBe(128 * MiB);

    expect(await codeOf(expand(volumeId, 1.5 * GiB))).toBe('RESOURCE_EXHAUSTED');
    expect(await codeOf(expand(volumeId, 3 * GiB))).toBe('OUT_OF_RANGE');
    expect(await codeOf(expand('not-a-volume', 128 * MiB))).toBe('NOT_FOUND');
    const missing = volumeId.replace(/[0-9a-f]{32}$/, 'f'.repeat(32));
    expect(await codeOf(expand(missing, 128 * MiB))).toBe('NOT_FOUND');
    const noRange = call((done) =>
      clients.controller.ControllerExpandVolume({ volume_id: volumeId }, withDeadline(), done),
    );
    expect(await codeOf(noRange)).toBe('INVALID_ARGUMENT');
  });
});
