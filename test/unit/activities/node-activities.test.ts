/**
 * The node activities as Temporal runs them (the SDK's MockActivityEnvironment: an activity context, heartbeats,
 * failures as the worker would report them), on a real dir pool: idempotent retries, the pool-identity answers that
 * keep a replaced pool from ever saying "deleted", and paging by list position.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { pastNode } from '../../../common/list-position';
import { promises as fs } from 'node:fs';
import { formatSnapshotId, formatVolumeId, poolIdPrefix } from '../../../common/names';
import { PoolLayout } from '../../../storage/pool/pool-layout';
import { writeSnapshot } from '../../../storage/pool/snapshots';
import { DriverError, FailureType } from '../../../common/failures';
import { createNodeActivities, type NodeSnapshotFilter } from '../../../activities/node-activities';
import { PoolFixture, randomKey } from '../storage/pool-fixture';

const NODE = 'node-1';
const MiB = 1024 ** 2;
const OTHER_POOL_PREFIX = '0123456789abcdef';

let fixture: PoolFixture;
let activities: ReturnType<typeof createNodeActivities>;
let backend: ReturnType<PoolFixture['backend']>;
let poolId: string;
const env = new MockActivityEnvironment();
/** env.run with the activity's own types (the SDK's signature infers `unknown`). */
const run = <A, R>(activity: (input: A) => Promise<R>, input: A): Promise<R> => env.run(activity, input) as Promise<R>;

beforeEach(async () => {
  fixture = new PoolFixture();
  backend = fixture.backend();
  ({ poolId } = await backend.open());
  activities = createNodeActivities({ backend, poolId, nodeId: NODE });
});

afterEach(() => fixture.cleanup());

const create = (key: string, name = `pvc-${key.slice(0, 8)}`, capacityBytes = 64 * MiB) =>
  run(activities.createVolumeOnNode, { key, name, capacityBytes, parameters: {} });

async function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof ApplicationFailure)) throw new Error(`expected an ApplicationFailure, got ${String(error)}`);
  return error;
}

describe('createVolumeOnNode', () => {
  it('allocates once: a retried attempt finds the earlier allocation (fresh: false) and says which node holds it', async () => {
    const key = randomKey();
    expect(await create(key)).toEqual({ key, poolId, nodeId: NODE, capacityBytes: 64 * MiB, fresh: true });
    expect(await create(key)).toEqual({ key, poolId, nodeId: NODE, capacityBytes: 64 * MiB, fresh: false });
    expect(fixture.exists('volumes', key)).toBe(true);
  });

  it('reports a refusal with its type, so the controller maps it to the right code (not retried)', async () => {
    const failure = await failureOf(create(randomKey(), 'pvc-huge', 1024 * 1024 * MiB));
    expect(failure.type).toBe(FailureType.ResourceExhausted);
    expect(failure.nonRetryable).toBe(true);
  });
});

describe('deleteVolumeOnNode', () => {
  it('deletes, then answers absent to a retry', async () => {
    const key = randomKey();
    await create(key);
    const input = { key, poolIdPrefix: poolIdPrefix(poolId) };
    expect(await run(activities.deleteVolumeOnNode, input)).toBe('deleted');
    expect(fixture.exists('volumes', key)).toBe(false);
    expect(await run(activities.deleteVolumeOnNode, input)).toBe('absent');
  });

  it('never deletes a volume of the same key in a pool the ID was not issued on: pool-replaced, nothing touched', async () => {
    const key = randomKey();
    await create(key);
    const before = fixture.tree();
    expect(await run(activities.deleteVolumeOnNode, { key, poolIdPrefix: OTHER_POOL_PREFIX })).toBe('pool-replaced');
    expect(fixture.tree()).toEqual(before);
  });
});

describe('a volume the node record is deleting because it was written off', () => {
  it('is handed to no create of its name while its deletion fails; once it is gone, the name makes a new volume', async () => {
    // A deletion refused before it changed anything (a read failed), retryably, as long as `failing` says.
    let failing = true;
    const flaky = new Proxy(backend, {
      get(target, property, receiver) {
        if (property === 'deleteVolume' && failing)
          return () => Promise.reject(new DriverError(FailureType.Internal, 'EIO: i/o error, reading the record'));
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const node = createNodeActivities({ backend: flaky, poolId, nodeId: NODE });
    const doomed = randomKey();
    await run(node.createVolumeOnNode, { key: doomed, name: 'pvc-again', capacityBytes: 64 * MiB, parameters: {} });
    const deletion = { key: doomed, poolIdPrefix: poolIdPrefix(poolId), writtenOff: true as const };
    expect((await failureOf(run(node.deleteVolumeOnNode, deletion))).nonRetryable).toBe(false);

    // The CO was told it is gone and creates the name again: the pool's create would answer the doomed volume.
    const again = { key: randomKey(), name: 'pvc-again', capacityBytes: 64 * MiB, parameters: {} };
    const refused = await failureOf(run(node.createVolumeOnNode, again));
    expect(refused.type).toBe(FailureType.Aborted);
    expect(refused.nonRetryable).toBe(false);
    expect(refused.message).toContain(`volume ${doomed} of this pool, which was written off`);

    failing = false;
    expect(await run(node.deleteVolumeOnNode, deletion)).toBe('deleted');
    expect(await run(node.createVolumeOnNode, again)).toMatchObject({ key: again.key, fresh: true });
  });
});

describe('expandVolumeOnNode and getVolumeOnNode', () => {
  it('grow and read a volume of this pool; a replaced pool is NOT_FOUND and holds nothing', async () => {
    const key = randomKey();
    await create(key);
    const own = { key, poolIdPrefix: poolIdPrefix(poolId) };
    const grown = await run(activities.expandVolumeOnNode, { ...own, capacityBytes: 128 * MiB });
    expect(grown.capacityBytes).toBe(128 * MiB);
    expect(await run(activities.getVolumeOnNode, own)).toMatchObject({ key, capacityBytes: 128 * MiB, poolId });
    const stranger = { key, poolIdPrefix: OTHER_POOL_PREFIX };
    const failure = await failureOf(run(activities.expandVolumeOnNode, { ...stranger, capacityBytes: 256 * MiB }));
    expect(failure.type).toBe(FailureType.NotFound);
    expect(await run(activities.getVolumeOnNode, stranger)).toBeUndefined();
  });
});

describe('listVolumePageOnNode', () => {
  it('lists from the start, continues after a position, and has nothing past the node', async () => {
    const keys = Array.from({ length: 5 }, () => randomKey()).sort();
    for (const key of keys) await create(key, `pvc-${key}`.padEnd(253, 'x'));
    const all = await run(activities.listVolumePageOnNode, { after: '', maxEntries: 10 });
    expect(all.volumes.map((v) => v.key)).toEqual(keys);
    expect(all.more).toBe(false);
    const prefix = poolIdPrefix(poolId);
    const after = formatVolumeId({ nodeId: NODE, poolIdPrefix: prefix, key: keys[1] ?? '' });
    const rest = await run(activities.listVolumePageOnNode, { after, maxEntries: 2 });
    expect(rest.volumes.map((v) => v.key)).toEqual(keys.slice(2, 4));
    expect(rest.more).toBe(true);
    expect((await run(activities.listVolumePageOnNode, { after: pastNode(NODE), maxEntries: 10 })).volumes).toEqual([]);
  });
});

describe('snapshot activities', () => {
  const snapshot = (snapshotKey: string, sourceKey: string, sourcePoolIdPrefix = poolIdPrefix(poolId)) =>
    run(activities.createSnapshotOnNode, { snapshotKey, sourceKey, sourcePoolIdPrefix, name: `snap-${snapshotKey}` });

  it('copies a volume on this node, idempotently, and says which node and pool hold the copy', async () => {
    const source = randomKey();
    await create(source);
    const key = randomKey();
    const made = await snapshot(key, source);
    expect(made).toEqual({
      key,
      name: `snap-${key}`,
      sourceKey: source,
      sizeBytes: 64 * MiB,
      createdAt: expect.any(String),
      poolId,
      nodeId: NODE,
    });
    expect(await snapshot(key, source)).toEqual(made);
    expect(await run(activities.listSnapshotPageOnNode, { after: '', maxEntries: 1_000 })).toEqual({
      nodeId: NODE,
      poolId,
      snapshots: [{ key, name: `snap-${key}`, sourceKey: source, sizeBytes: 64 * MiB, createdAt: made.createdAt }],
      more: false,
    });
  });

  it('refuses a source named on a replaced pool, and never deletes a copy for a pool that is not its own', async () => {
    const source = randomKey();
    await create(source);
    const failure = await failureOf(snapshot(randomKey(), source, OTHER_POOL_PREFIX));
    expect(failure.type).toBe(FailureType.NotFound);
    const key = randomKey();
    await snapshot(key, source);
    expect(await run(activities.deleteSnapshotOnNode, { key, poolIdPrefix: OTHER_POOL_PREFIX })).toBe('pool-replaced');
    expect(fixture.exists('snapshots', 'data', key)).toBe(true);
    expect(await run(activities.deleteSnapshotOnNode, { key, poolIdPrefix: poolIdPrefix(poolId) })).toBe('deleted');
    expect(await run(activities.deleteSnapshotOnNode, { key, poolIdPrefix: poolIdPrefix(poolId) })).toBe('absent');
    expect(fixture.exists('snapshots', 'data', key)).toBe(false);
  });

  it('restores at the source size when no size is required and the limit allows, else as asked', async () => {
    const source = randomKey();
    await create(source, 'pvc-source', 128 * MiB);
    const key = randomKey();
    await snapshot(key, source);
    const prefix = poolIdPrefix(poolId);
    const restore = (capacityBytes: number, limitBytes: number) =>
      run(activities.createVolumeOnNode, {
        key: randomKey(),
        name: `pvc-${randomKey().slice(0, 8)}`,
        capacityBytes,
        parameters: {},
        contentSource: { snapshotKey: key, poolIdPrefix: prefix },
        limitBytes,
      });
    expect((await restore(0, 0)).capacityBytes).toBe(128 * MiB);
    expect((await restore(256 * MiB, 0)).capacityBytes).toBe(256 * MiB);
    expect((await failureOf(restore(64 * MiB, 64 * MiB))).type).toBe(FailureType.OutOfRange);
    const clone = await run(activities.createVolumeOnNode, {
      key: randomKey(),
      name: 'pvc-clone',
      capacityBytes: 0,
      parameters: {},
      contentSource: { volumeKey: source, poolIdPrefix: prefix },
    });
    expect(clone.capacityBytes).toBe(128 * MiB);
    const missing = await failureOf(
      run(activities.createVolumeOnNode, {
        key: randomKey(),
        name: 'pvc-missing',
        capacityBytes: 0,
        parameters: {},
        contentSource: { snapshotKey: randomKey(), poolIdPrefix: prefix },
      }),
    );
    expect(missing.type).toBe(FailureType.NotFound);
    const replaced = await failureOf(
      run(activities.createVolumeOnNode, {
        key: randomKey(),
        name: 'pvc-replaced',
        capacityBytes: 0,
        parameters: {},
        contentSource: { snapshotKey: key, poolIdPrefix: OTHER_POOL_PREFIX },
      }),
    );
    expect(replaced.type).toBe(FailureType.NotFound);
  });
});

describe('listSnapshotPageOnNode', () => {
  const snapshotOf = (snapshotKey: string, sourceKey: string) =>
    run(activities.createSnapshotOnNode, {
      snapshotKey,
      sourceKey,
      sourcePoolIdPrefix: poolIdPrefix(poolId),
      name: `snap-${snapshotKey}`,
    });

  it('pages by snapshot list position, and filters a lookup by key or source on its own pool only', async () => {
    const [first, second] = [randomKey(), randomKey()];
    await create(first);
    await create(second);
    const ofFirst = Array.from({ length: 4 }, () => randomKey()).sort();
    const ofSecond = Array.from({ length: 2 }, () => randomKey()).sort();
    for (const key of ofFirst) await snapshotOf(key, first);
    for (const key of ofSecond) await snapshotOf(key, second);
    const every = [...ofFirst, ...ofSecond].sort();
    const prefix = poolIdPrefix(poolId);
    const page = (after: string, maxEntries: number, only?: NodeSnapshotFilter) =>
      run(activities.listSnapshotPageOnNode, { after, maxEntries, ...(only && { only }) });

    const start = await page('', 4);
    expect(start.snapshots.map((s) => s.key)).toEqual(every.slice(0, 4));
    expect(start.more).toBe(true);
    const after = formatSnapshotId({ nodeId: NODE, poolIdPrefix: prefix, key: every[3]! });
    expect(await page(after, 4)).toMatchObject({ more: false });
    expect((await page(after, 4)).snapshots.map((s) => s.key)).toEqual(every.slice(4));
    expect((await page(pastNode(NODE, 's1'), 10)).snapshots).toEqual([]);

    const bySource = await page('', 1, { poolIdPrefix: prefix, sourceKey: second });
    expect(bySource.snapshots.map((s) => s.key)).toEqual(ofSecond.slice(0, 1));
    expect(bySource.more).toBe(true);
    expect((await page('', 10, { poolIdPrefix: prefix, key: ofFirst[2] })).snapshots.map((s) => s.key)).toEqual([
      ofFirst[2],
    ]);
    // A lookup issued on another pool finds nothing here, whatever keys this pool holds.
    expect(await page('', 10, { poolIdPrefix: OTHER_POOL_PREFIX, key: ofFirst[2] })).toMatchObject({
      snapshots: [],
      more: false,
    });
  });

  it("answers a page of snapshots within one answer's bytes, saying more follow", async () => {
    const source = randomKey();
    await create(source);
    const layout = new PoolLayout(fixture.pool);
    const createdAt = new Date().toISOString();
    // Names of 253 bytes (the longest CSI allows): 900 of them are past one answer's 256 KiB.
    for (let index = 0; index < 900; index++) {
      const key = randomKey();
      await fs.mkdir(layout.snapshotDir(key));
      await writeSnapshot(layout, {
        key,
        name: `snapshot-${key}`.padEnd(253, 'x'),
        sourceKey: source,
        sizeBytes: MiB,
        createdAt,
      });
    }
    await backend.close(); // as an agent restarting: the new one reads the records written meanwhile
    const reopened = fixture.backend();
    await reopened.open();
    const again = createNodeActivities({ backend: reopened, poolId, nodeId: NODE });
    const page = await run(again.listSnapshotPageOnNode, { after: '', maxEntries: 1_000 });
    expect(page.more).toBe(true);
    expect(page.snapshots.length).toBeLessThan(900);
  }, 60_000);
});
