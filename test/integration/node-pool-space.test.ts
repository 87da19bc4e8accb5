import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { releaseMountsUnder } from '../unit/storage/mount-helpers';

/**
 * A loop pool has real capacity: a create that the pool's reservation or the filesystem holding it cannot take
 * is RESOURCE_EXHAUSTED, and nothing of it is left in the pool.
 */
describe('a loop pool that runs out of space', () => {
  const cluster = new TestCluster('node-space');
  let clients: ReturnType<TestCluster['csi']>;

  beforeAll(async () => {
    // node-small's pool lives on a 96 MiB filesystem but claims 10Gi; node-tight claims 256Mi.
    fs.mkdirSync(cluster.pool('node-small'), { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=96m', 'tmpfs', cluster.pool('node-small')]);
    await cluster.startNode('node-small', { backend: 'loop', capacity: '10Gi' });
    await cluster.startNode('node-tight', { backend: 'loop', capacity: '256Mi' });
    clients = cluster.csi((await cluster.startController()).endpoint);
  });
  afterAll(async () => {
    releaseMountsUnder(cluster.root);
    await cluster.teardown();
  });

  it.each([
    ['node-small', 128 * MiB, 'the filesystem holding the pool'],
    ['node-tight', 512 * MiB, 'the reservation'],
  ])('answers RESOURCE_EXHAUSTED on %s with nothing allocated (%s)', async (nodeId, bytes) => {
    const before = cluster.poolEntries(nodeId);
    const request = createRequest(`pvc-too-big-${nodeId}`, bytes, onNode(nodeId));
    expect(await codeOf(retryLikeCo(() => createVolume(clients, request)))).toBe('RESOURCE_EXHAUSTED');
    expect(cluster.poolEntries(nodeId)).toEqual(before);
    expect(cluster.volumesOnDisk(nodeId)).toEqual([]);

    const fits = createRequest(`pvc-fits-${nodeId}`, 32 * MiB, onNode(nodeId));
    expect((await retryLikeCo(() => createVolume(clients, fits))).volume?.capacity_bytes).toBe(String(32 * MiB));
  });
});
