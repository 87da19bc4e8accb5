import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { call, withDeadline } from '../../csi/client';
import type { ListVolumesResponse__Output } from '../../csi/generated/csi/v1/ListVolumesResponse';
import { VolumeOperations } from '../../operations/volume-operations';
import { PoolLayout } from '../../storage/pool/pool-layout';
import { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { execFile } from 'node:child_process';
import { CLI_MAIN } from '../../agent/spawn-cli';
import { eventually } from '../support/eventually';

const RECORDS = 20_000;

/**
 * 20,000 volumes on one real dir pool are more than one Temporal payload (2 MB) can carry: ListVolumes, the orphan
 * report's listing and `volumes list` must read them page by page, every volume exactly once, in volume-ID order.
 * The records are written in the pool's on-disk format while its agent is stopped (20,000 workflows would take
 * far too long); the agent reads them when it opens the pool again.
 */
describe('ListVolumes pages at 20,000 volumes', () => {
  const cluster = new TestCluster('paging');
  let clients: ReturnType<TestCluster['csi']>;
  let endpoint = '';
  const expected: string[] = [];
  let node2: Awaited<ReturnType<TestCluster['startNode']>>;

  beforeAll(async () => {
    const node1 = await cluster.startNode('node-1', { capacity: '100Ti' });
    endpoint = (await cluster.startController()).endpoint;
    clients = cluster.csi(endpoint);
    const small = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-small', 64 * MiB, onNode('node-1'))),
    );
    await node1.stop();
    const poolId = await writeRecords(cluster.pool('node-1'), RECORDS);
    // One volume on a second node, whose ID sorts after all of node-1's: the pages cross from one node to the next.
    node2 = await cluster.startNode('node-2');
    const other = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-other', 64 * MiB, onNode('node-2'))),
    );
    await cluster.startNode('node-1', { capacity: '100Ti' });
    const prefix = poolId.replace(/-/g, '').slice(0, 16);
    expected.push(
      ...(await fs.readdir(new PoolLayout(cluster.pool('node-1')).recordsDir)).map(
        (file) => `v1_node-1_${prefix}_${file.replace(/\.json$/, '')}`,
      ),
      other.volume!.volume_id,
    );
    expected.sort();
    expect(expected).toContain(small.volume!.volume_id);
    expect(expected).toHaveLength(RECORDS + 2);
  }, 480_000); // the agent reads 20,000 records at open, on a machine shared with other suites
  afterAll(() => cluster.teardown());

  async function listAll(maxEntries: number): Promise<{ ids: string[]; pages: number; largest: number }> {
    const ids: string[] = [];
    let token = '';
    let pages = 0;
    let largest = 0;
    do {
      const page = await call<ListVolumesResponse__Output>((done) =>
        clients.controller.ListVolumes({ max_entries: maxEntries, starting_token: token }, withDeadline(30_000), done),
      );
      if (maxEntries > 0) expect(page.entries.length).toBeLessThanOrEqual(maxEntries);
      ids.push(...page.entries.map((entry) => entry.volume!.volume_id));
      largest = Math.max(largest, page.entries.length);
      token = page.next_token;
      pages++;
    } while (token && pages < 1000);
    return { ids, pages, largest };
  }

  it('lists every volume once, in order, with or without max_entries', async () => {
    const unbounded = await listAll(0);
    expect(unbounded.ids).toEqual(expected);
    expect(unbounded.pages).toBeGreaterThan(1);
    const bounded = await listAll(7_000);
    expect(bounded.ids).toEqual(expected);
    expect(bounded.largest).toBeLessThanOrEqual(7_000);
  }, 240_000);

  it('continues after any volume ID, and answers ABORTED for a token it did not issue', async () => {
    const from = expected[RECORDS - 3]!;
    const page = await call<ListVolumesResponse__Output>((done) =>
      clients.controller.ListVolumes({ max_entries: 10, starting_token: from }, withDeadline(30_000), done),
    );
    expect(page.entries.map((entry) => entry.volume!.volume_id)).toEqual(expected.slice(RECORDS - 2));
    expect(page.next_token).toBe('');
    for (const token of ['garbage', 'v1_node-1_zz', `${from}x`]) {
      const bad = call((done) => clients.controller.ListVolumes({ starting_token: token }, withDeadline(), done));
      expect(await codeOf(bad)).toBe('ABORTED');
    }
  }, 60_000);

  it('gives the orphan report every volume and the nodes that answered', async () => {
    const listing = await new VolumeOperations(await cluster.temporal(), cluster.driverName).list();
    expect(listing.volumes.map((volume) => volume.volumeId)).toEqual(expected);
    expect(listing.answeredNodes).toEqual(['node-1', 'node-2']);
    expect(listing.unreachableNodes).toEqual([]);
  }, 240_000);

  it('prints every volume in `volumes list`', async () => {
    const listed = await cliWithLargeOutput(['volumes', '--endpoint', endpoint, 'list']);
    expect(listed.stderr).toBe('');
    expect(listed.code).toBe(0);
    const ids = listed.stdout
      .trim()
      .split('\n')
      .slice(1)
      .map((line) => line.split(/\s+/)[0]);
    expect(ids).toEqual(expected);
  }, 240_000);

  it('names a node that is down, and lists the others', async () => {
    await node2.stop(); // SIGTERM: its record turns offline at once
    const operations = new VolumeOperations(await cluster.temporal(), cluster.driverName);
    const listing = await eventually('node-2 unreachable in the list', async () => {
      const answer = await operations.list();
      return answer.unreachableNodes.length > 0 && answer;
    });
    expect(listing.unreachableNodes).toEqual(['node-2']);
    expect(listing.answeredNodes).toEqual(['node-1']);
    expect(listing.volumes.map((volume) => volume.volumeId)).toEqual(expected.slice(0, RECORDS + 1));
  }, 240_000);
});

/** Writes `count` records (and their directories) in the pool's own on-disk format; returns the pool's identity. */
async function writeRecords(pool: string, count: number): Promise<string> {
  const layout = new PoolLayout(pool);
  const { poolId } = JSON.parse(await fs.readFile(layout.identityFile, 'utf8')) as { poolId: string };
  const createdAt = new Date().toISOString();
  const write = async (index: number) => {
    const key = randomUUID().replace(/-/g, '');
    await fs.mkdir(path.join(layout.volumesDir, key));
    const record = { key, name: `pvc-${randomUUID()}`, capacityBytes: MiB, parameters: {}, createdAt };
    await fs.writeFile(layout.recordFile(key), JSON.stringify(record));
    return index;
  };
  for (let start = 0; start < count; start += 500) {
    await Promise.all(Array.from({ length: Math.min(500, count - start) }, (_, offset) => write(start + offset)));
  }
  return poolId;
}

/** Like runCli, with room for 20,000 rows (execFile keeps 1 MB of output unless told). */
function cliWithLargeOutput(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_MAIN, ...args],
      { timeout: 180_000, maxBuffer: 64 * MiB },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
      },
    );
  });
}
