/**
 * The pool backend answers create, expand, status and listVolumes from an in-memory index of its records. What
 * it answers must be what the disk holds: after every change, after a change that failed part way, and after
 * records changed while the pool was closed.
 */
import fs from 'node:fs';
import { FailureType } from '../../../common/failures';
import * as files from '../../../storage/host/files';
import type { CreateVolumeSpec, StorageBackend } from '../../../storage/pool/backend';
import { DirBackend } from '../../../storage/dir/dir-backend';
import * as journal from '../../../storage/pool/journal';
import { PoolLayout } from '../../../storage/pool/pool-layout';
import { RecordIndex, reserved } from '../../../storage/pool/pool-indexes';
import { listRecords, writeRecord } from '../../../storage/pool/records';
import type { StoredRecord } from '../../../storage/pool/records';
import { expectDriverError } from '../../support/driver-error';
import { GI, PoolFixture, randomKey } from './pool-fixture';

type Step = 'allocate' | 'release' | 'grow';

/** A dir backend whose allocate, release or grow throw while armed, as a full disk or an I/O error would. */
class FlakyDirBackend extends DirBackend {
  readonly failing = new Set<Step>();

  override async allocate(): Promise<void> {
    this.fail('allocate');
  }

  override async release(intent: journal.Intent): Promise<void> {
    this.fail('release');
    await super.release(intent);
  }

  override async grow(): Promise<void> {
    this.fail('grow');
  }

  private fail(step: Step): void {
    if (this.failing.has(step)) throw new Error(`injected failure in ${step}`);
  }
}

let fixture: PoolFixture<FlakyDirBackend>;
let layout: PoolLayout;

beforeEach(() => {
  fixture = new PoolFixture((options) => new FlakyDirBackend({ ...options, quota: 'none' }), 'index');
  layout = new PoolLayout(fixture.pool);
});

afterEach(async () => {
  jest.restoreAllMocks();
  await fixture.cleanup();
});

function spec(overrides: Partial<CreateVolumeSpec> = {}): CreateVolumeSpec {
  return { key: randomKey(), name: `pvc-${randomKey().slice(0, 8)}`, capacityBytes: GI, parameters: {}, ...overrides };
}

function stored(overrides: Partial<StoredRecord> = {}): StoredRecord {
  return { ...spec(), createdAt: new Date().toISOString(), ...overrides };
}

/** status() and listVolumes() agree with records/ and journal/ as read from disk. */
async function expectMatchesDisk(backend: StorageBackend): Promise<void> {
  const records = await listRecords(layout);
  const { intents } = await journal.listIntents(layout);
  const reservedBytes = reserved(records, intents);
  expect(await backend.status()).toMatchObject({ reservedBytes, volumeCount: records.length });
  expect(await backend.listVolumes()).toEqual(
    records.map((record) => ({ ...record, path: layout.volumeDir(record.key) })),
  );
}

describe('the record index', () => {
  it('follows creates, deletes and expansions', async () => {
    const backend = await fixture.opened(10 * GI);
    const volumes = [];
    for (const capacityBytes of [GI, 2 * GI, 0, 3]) volumes.push(await backend.createVolume(spec({ capacityBytes })));
    await expectMatchesDisk(backend);

    await backend.deleteVolume(volumes[1]!.key);
    await backend.expandVolume(volumes[3]!.key, GI);
    await backend.expandVolume(volumes[0]!.key, GI - 1);
    await expectMatchesDisk(backend);
    expect(await backend.status()).toMatchObject({ reservedBytes: 2 * GI, volumeCount: 3 });

    // By key and by name, the index finds what is there; a deleted volume's name is free again.
    expect(await backend.createVolume({ ...volumes[0]!, key: randomKey() })).toEqual(volumes[0]);
    const again = spec({ name: volumes[1]!.name, capacityBytes: 5 * GI });
    expect((await backend.createVolume(again)).key).toBe(again.key);
    await expectMatchesDisk(backend);
  });

  it('reserves to the byte', async () => {
    const backend = await fixture.opened(10 * GI);
    const a = await backend.createVolume(spec({ capacityBytes: 4 * GI }));
    const b = await backend.createVolume(spec({ capacityBytes: 3 * GI }));
    await backend.expandVolume(a.key, 5 * GI);
    await backend.deleteVolume(b.key);

    await expectDriverError(
      backend.createVolume(spec({ capacityBytes: 5 * GI + 1 })),
      FailureType.ResourceExhausted,
      /cannot reserve 5\.0Gi .*: 5Gi of the pool's 10Gi is available/,
    );
    const c = await backend.createVolume(spec({ capacityBytes: 5 * GI }));
    await expectDriverError(backend.expandVolume(c.key, 5 * GI + 1), FailureType.ResourceExhausted, /1B more and 0B/);
    await backend.createVolume(spec({ capacityBytes: 0 }));
    expect(await backend.status()).toMatchObject({ reservedBytes: 10 * GI, availableBytes: 0, volumeCount: 3 });
    await expectMatchesDisk(backend);
  });

  it('reads no record but the one it changes, however many the pool holds', async () => {
    const backend = await fixture.opened(100 * GI);
    const volumes = [];
    for (let i = 0; i < 20; i++) volumes.push(await backend.createVolume(spec()));
    const reads = jest.spyOn(files, 'readJson');

    await backend.status();
    await backend.createVolume(spec());
    await backend.createVolume({ ...volumes[3]!, key: randomKey() });
    await backend.expandVolume(volumes[7]!.key, 2 * GI);
    await backend.status();

    const recordReads = reads.mock.calls.map(([file]) => file).filter((file) => file.startsWith(layout.recordsDir));
    expect(recordReads).toEqual([layout.recordFile(volumes[7]!.key)]);
  });

  it('counts a create that failed and could not be rolled back until the next call settles it', async () => {
    const backend = await fixture.opened(10 * GI);
    await backend.createVolume(spec({ capacityBytes: 2 * GI }));
    backend.failing.add('allocate').add('release');

    await expect(backend.createVolume(spec({ capacityBytes: 3 * GI }))).rejects.toThrow(/injected failure in allocate/);
    expect(fixture.list('journal')).toHaveLength(1);
    expect((await backend.status()).reservedBytes).toBe(5 * GI);
    await expectMatchesDisk(backend);

    backend.failing.clear();
    await backend.createVolume(spec({ capacityBytes: 8 * GI }));
    expect(fixture.list('journal')).toEqual([]);
    expect(await backend.status()).toMatchObject({ reservedBytes: 10 * GI, volumeCount: 2 });
    await expectMatchesDisk(backend);
  });

  it('sees a create whose record was written though its intent could not be removed', async () => {
    const backend = await fixture.opened(10 * GI);
    const request = spec({ capacityBytes: 3 * GI });
    // Every removal of a journal file fails: the create's own and the rollback's after it.
    const removeFile = files.removeFile;
    const removeIntent = jest.spyOn(files, 'removeFile').mockImplementation(async (file) => {
      if (file.startsWith(layout.journalDir)) throw new Error('injected failure');
      return removeFile(file);
    });

    await expect(backend.createVolume(request)).rejects.toThrow(/injected failure/);
    expect(fixture.list('records')).toEqual([`${request.key}.json`]);
    expect(fixture.list('journal')).toEqual([`${request.key}.json`]);
    expect(await backend.status()).toMatchObject({ reservedBytes: 3 * GI, volumeCount: 1 });
    await expectMatchesDisk(backend);

    removeIntent.mockRestore();
    expect(await backend.createVolume({ ...request, key: randomKey() })).toMatchObject({ key: request.key });
    expect(fixture.list('journal')).toEqual([]);
    await expectMatchesDisk(backend);
  });

  it('follows a delete that failed part way and was finished by the next call', async () => {
    const backend = await fixture.opened(10 * GI);
    const doomed = await backend.createVolume(spec({ capacityBytes: 4 * GI }));
    backend.failing.add('release');

    await expect(backend.deleteVolume(doomed.key)).rejects.toThrow(/injected failure in release/);
    await expectMatchesDisk(backend);

    backend.failing.clear();
    await backend.createVolume(spec({ capacityBytes: 7 * GI }));
    expect(fixture.list('records')).toHaveLength(1);
    expect(await backend.status()).toMatchObject({ reservedBytes: 7 * GI, volumeCount: 1 });
    await expectMatchesDisk(backend);
  });

  it('keeps the old size when growing fails, and grows on a retry', async () => {
    const backend = await fixture.opened(10 * GI);
    const volume = await backend.createVolume(spec({ capacityBytes: 2 * GI }));
    backend.failing.add('grow');

    await expect(backend.expandVolume(volume.key, 9 * GI)).rejects.toThrow(/injected failure in grow/);
    expect(await backend.status()).toMatchObject({ reservedBytes: 2 * GI });
    await expectMatchesDisk(backend);

    backend.failing.clear();
    await backend.expandVolume(volume.key, 9 * GI);
    expect(await backend.status()).toMatchObject({ reservedBytes: 9 * GI });
    await expectMatchesDisk(backend);
  });

  it('is read again at open(): records added or removed by hand while the pool was closed are seen', async () => {
    const backend = await fixture.opened(10 * GI);
    const kept = await backend.createVolume(spec({ capacityBytes: GI }));
    const removed = await backend.createVolume(spec({ capacityBytes: 2 * GI }));
    await backend.close();
    const added = stored({ capacityBytes: 3 * GI });
    await writeRecord(layout, added);
    fs.mkdirSync(layout.volumeDir(added.key));
    fs.rmSync(layout.recordFile(removed.key));
    fs.rmSync(layout.volumeDir(removed.key), { recursive: true });

    // The same instance: close() and open() must not keep what it knew.
    await backend.open();
    await expectMatchesDisk(backend);
    expect((await backend.listVolumes()).map((volume) => volume.key)).toEqual([kept.key, added.key].sort());
    expect(await backend.createVolume({ ...spec(), name: added.name, capacityBytes: 3 * GI })).toMatchObject({
      key: added.key,
    });
    expect(await backend.status()).toMatchObject({ reservedBytes: 4 * GI, volumeCount: 2 });
  });
});

describe('listVolumePage', () => {
  it('pages through every record once, in key order, and sees changes between pages', async () => {
    const backend = await fixture.opened(100 * GI);
    const keys: string[] = [];
    for (let index = 0; index < 7; index++) keys.push((await backend.createVolume(spec())).key);
    keys.sort();
    const first = await backend.listVolumePage(undefined, 3);
    expect(first.volumes.map((volume) => volume.key)).toEqual(keys.slice(0, 3));
    expect(first.more).toBe(true);
    // A volume deleted after the position and one created anywhere: the next page reads the index as it is now.
    await backend.deleteVolume(keys[4]!);
    const added = await backend.createVolume(spec());
    const rest = await backend.listVolumePage(keys[2], 100);
    const expected = [...keys.slice(3).filter((key) => key !== keys[4]), ...(added.key > keys[2]! ? [added.key] : [])];
    expect(rest.volumes.map((volume) => volume.key)).toEqual(expected.sort());
    expect(rest.more).toBe(false);
    expect(rest.volumes[0]).toEqual(await backend.getVolume(rest.volumes[0]!.key));
    // After a key that is not (or no longer) there, and past the last one.
    expect((await backend.listVolumePage(keys[4], 1)).volumes.map((volume) => volume.key)).toEqual(
      [...keys.slice(5), added.key]
        .filter((key) => key > keys[4]!)
        .sort()
        .slice(0, 1),
    );
    expect(await backend.listVolumePage('~', 5)).toEqual({ volumes: [], more: false });
    await expectDriverError(backend.listVolumePage(undefined, 0), FailureType.InvalidArgument, /page limit 0/);
  });
});

describe('RecordIndex.load', () => {
  it('counts records and unfinished creates by what they take, a create with a record once', async () => {
    await (await fixture.opened()).close();
    const sector = (bytes: number) => Math.ceil(bytes / 512) * 512;
    const written = stored({ capacityBytes: 1000 });
    await writeRecord(layout, written);
    const at = new Date().toISOString();
    await journal.writeIntent(layout, { op: 'create', ...spec({ key: written.key, capacityBytes: 1000 }), at });
    await journal.writeIntent(layout, { op: 'create', ...spec({ capacityBytes: 1 }), at });
    await journal.writeIntent(layout, { op: 'delete', ...spec({ capacityBytes: GI }), at });

    const index = await RecordIndex.load(layout, sector);
    expect(index.reservedBytes).toBe(1024 + 512);
    index.put({ ...written, capacityBytes: 1025 });
    expect(index.reservedBytes).toBe(1536 + 512);
    index.remove(written.key);
    index.remove(written.key);
    expect(index.reservedBytes).toBe(512);
    expect(index.size).toBe(0);
  });

  it('finds a name shared by records written by hand under its lowest key, as a scan by key would', async () => {
    await (await fixture.opened()).close();
    const [low, high] = [randomKey(), randomKey()].sort() as [string, string];
    await writeRecord(layout, stored({ key: high, name: 'twin' }));
    await writeRecord(layout, stored({ key: low, name: 'twin' }));

    const index = await RecordIndex.load(layout, (bytes) => bytes);
    expect(index.byName('twin')?.key).toBe(low);
    index.remove(low);
    expect(index.byName('twin')?.key).toBe(high);
    index.remove(high);
    expect(index.byName('twin')).toBeUndefined();
  });
});
