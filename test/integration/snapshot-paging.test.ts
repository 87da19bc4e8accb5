import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { call, withDeadline } from '../../csi/client';
import type { ListSnapshotsResponse__Output } from '../../csi/generated/csi/v1/ListSnapshotsResponse';
import { formatSnapshotId, formatVolumeId, parseVolumeId, poolIdPrefix } from '../../common/names';
import { SnapshotOperations } from '../../operations/snapshot-operations';
import { PoolLayout } from '../../storage/pool/pool-layout';
import { writeSnapshot } from '../../storage/pool/snapshots';
import { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { runCli } from '../support/run-cli';
import { testTemporalFlags } from '../support/test-temporal';
import { createSnapshot } from '../support/snapshot-requests';

const RECORDS = 20_000;
/** Of them, snapshots of a volume deleted since (its key is in no volume record: a snapshot outlives its source). */
const OF_DELETED_SOURCE = 1_000;

/**
 * 20,000 snapshots on one real dir pool are more than one node answer (256 KiB) or one Temporal payload (2 MB) can
 * carry: ListSnapshots, a lookup by snapshot or source volume ID, and the orphan report's listing read them page by
 * page, every snapshot exactly once, in snapshot-ID order, through the real workflows and node activities. The
 * records are written by the pool's own record layer while its agent is stopped (20,000 copies through CreateSnapshot
 * would take far too long); the agent reads them when it opens the pool again.
 */
describe('ListSnapshots pages at 20,000 snapshots', () => {
  const cluster = new TestCluster('snapshot-paging');
  let clients: ReturnType<TestCluster['csi']>;
  let endpoint = '';
  const expected: string[] = [];
  const ofDeletedSource: string[] = [];
  let deletedSourceId = '';

  beforeAll(async () => {
    const node1 = await cluster.startNode('node-1', { capacity: '100Ti' });
    endpoint = (await cluster.startController('controller', ['--snapshots'])).endpoint;
    clients = cluster.csi(endpoint);
    const source = await retryLikeCo(() => createVolume(clients, createRequest('pvc-source', MiB, onNode('node-1'))));
    const sourceId = source.volume!.volume_id;
    const real = await retryLikeCo(() => createSnapshot(clients, 'snap-real', sourceId));
    await node1.stop();
    const prefix = parseVolumeId(sourceId)!.poolIdPrefix;
    deletedSourceId = formatVolumeId({ nodeId: 'node-1', poolIdPrefix: prefix, key: randomUUID().replace(/-/g, '') });
    const written = await writeSnapshots(cluster.pool('node-1'), RECORDS, (index) =>
      index < OF_DELETED_SOURCE ? deletedSourceId : sourceId,
    );
    // One snapshot on a second node, whose ID sorts after all of node-1's: the pages cross from one node to the next.
    await cluster.startNode('node-2');
    const other = await retryLikeCo(() => createVolume(clients, createRequest('pvc-other', MiB, onNode('node-2'))));
    const otherSnapshot = await retryLikeCo(() => createSnapshot(clients, 'snap-other', other.volume!.volume_id));
    await cluster.startNode('node-1', { capacity: '100Ti' });
    expected.push(...written.map((entry) => entry.snapshotId), real.snapshot!.snapshot_id);
    expected.push(otherSnapshot.snapshot!.snapshot_id);
    expected.sort();
    ofDeletedSource.push(
      ...written.filter((entry) => entry.sourceVolumeId === deletedSourceId).map((e) => e.snapshotId),
    );
    ofDeletedSource.sort();
    expect(expected).toHaveLength(RECORDS + 2);
    expect(ofDeletedSource).toHaveLength(OF_DELETED_SOURCE);
  }, 480_000); // the agent reads 20,000 records at open, on a machine shared with other suites
  afterAll(() => cluster.teardown());

  async function listAll(request: Record<string, unknown>): Promise<{ ids: string[]; pages: number }> {
    const ids: string[] = [];
    let token = '';
    let pages = 0;
    do {
      const page = await call<ListSnapshotsResponse__Output>((done) =>
        clients.controller.ListSnapshots({ ...request, starting_token: token }, withDeadline(30_000), done),
      );
      const max = Number(request.max_entries ?? 0);
      if (max > 0) expect(page.entries.length).toBeLessThanOrEqual(max);
      ids.push(...page.entries.map((entry) => entry.snapshot!.snapshot_id));
      token = page.next_token;
      pages++;
    } while (token && pages < 1000);
    return { ids, pages };
  }

  it('lists every snapshot once, in order, with or without max_entries', async () => {
    const unbounded = await listAll({});
    expect(unbounded.ids).toEqual(expected);
    expect(unbounded.pages).toBeGreaterThan(1);
    const bounded = await listAll({ max_entries: 7_000 });
    expect(bounded.ids).toEqual(expected);
  }, 240_000);

  it('finds any snapshot by its ID, and every snapshot of a source volume, asking that node only', async () => {
    for (const snapshotId of [expected[0]!, expected[RECORDS - 1]!, expected[RECORDS + 1]!]) {
      expect((await listAll({ snapshot_id: snapshotId })).ids).toEqual([snapshotId]);
    }
    const missing = formatSnapshotId({ ...parseVolumeId(deletedSourceId)!, key: 'f'.repeat(32) });
    expect((await listAll({ snapshot_id: missing })).ids).toEqual([]);
    const bySource = await listAll({ source_volume_id: deletedSourceId, max_entries: 300 });
    expect(bySource.ids).toEqual(ofDeletedSource);
    expect(bySource.pages).toBe(4);
  }, 120_000);

  it('continues after any snapshot ID or node boundary, and answers ABORTED for a token it did not issue', async () => {
    const from = expected[RECORDS - 3]!;
    const page = await call<ListSnapshotsResponse__Output>((done) =>
      clients.controller.ListSnapshots({ max_entries: 10, starting_token: from }, withDeadline(30_000), done),
    );
    expect(page.entries.map((entry) => entry.snapshot!.snapshot_id)).toEqual(expected.slice(RECORDS - 2));
    expect(page.next_token).toBe('');
    const pastNode1 = await call<ListSnapshotsResponse__Output>((done) =>
      clients.controller.ListSnapshots({ starting_token: 's1_node-1_~' }, withDeadline(30_000), done),
    );
    expect(pastNode1.entries.map((entry) => entry.snapshot!.snapshot_id)).toEqual([expected[RECORDS + 1]]);
    for (const token of ['garbage', 's1_node-1_zz', `${from}x`, 'v1_node-1_~']) {
      const bad = call((done) => clients.controller.ListSnapshots({ starting_token: token }, withDeadline(), done));
      expect(await codeOf(bad)).toBe('ABORTED');
    }
  }, 60_000);

  it('gives the orphan report every snapshot and the nodes that answered, and `snapshots list --source` its own', async () => {
    const listing = await new SnapshotOperations(await cluster.temporal(), cluster.driverName).list();
    expect(listing.snapshots.map((snapshot) => snapshot.snapshotId)).toEqual(expected);
    expect(listing.answeredNodes).toEqual(['node-1', 'node-2']);
    expect(listing.unreachableNodes).toEqual([]);
    const flags = ['--driver-name', cluster.driverName, ...testTemporalFlags()];
    const listed = await runCli(['snapshots', 'list', '--source', deletedSourceId, '--json', ...flags]);
    expect(listed.stderr).toBe('');
    const answer = JSON.parse(listed.stdout) as { snapshots: { snapshotId: string }[] };
    expect(answer.snapshots.map((snapshot) => snapshot.snapshotId)).toEqual(ofDeletedSource);
  }, 240_000);
});

/**
 * Writes `count` snapshot records (and their copies' directories, empty) with the pool's own record layer, the
 * source volume of each chosen by its index; returns what a listing must show of them.
 */
async function writeSnapshots(pool: string, count: number, sourceOf: (index: number) => string) {
  const layout = new PoolLayout(pool);
  const { poolId } = JSON.parse(await fs.readFile(layout.identityFile, 'utf8')) as { poolId: string };
  const prefix = poolIdPrefix(poolId);
  const createdAt = new Date().toISOString();
  const write = async (index: number) => {
    const key = randomUUID().replace(/-/g, '');
    const sourceVolumeId = sourceOf(index);
    await fs.mkdir(layout.snapshotDir(key));
    const name = `snapshot-${randomUUID()}`;
    await writeSnapshot(layout, {
      key,
      name,
      sourceKey: parseVolumeId(sourceVolumeId)!.key,
      sizeBytes: MiB,
      createdAt,
    });
    return { snapshotId: formatSnapshotId({ nodeId: 'node-1', poolIdPrefix: prefix, key }), sourceVolumeId };
  };
  const written: { snapshotId: string; sourceVolumeId: string }[] = [];
  for (let start = 0; start < count; start += 500) {
    const batch = Array.from({ length: Math.min(500, count - start) }, (_, offset) => write(start + offset));
    written.push(...(await Promise.all(batch)));
  }
  return written;
}
