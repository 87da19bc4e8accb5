import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { FailureType } from '../../../common/failures';
import { DirBackend } from '../../../storage/dir/dir-backend';
import { writeIntent } from '../../../storage/pool/journal';
import type { Intent } from '../../../storage/pool/journal';
import { PoolLayout } from '../../../storage/pool/pool-layout';
import { writeRecord } from '../../../storage/pool/records';
import { expectDriverError } from '../../support/driver-error';
import { GI, PoolFixture, randomKey } from './pool-fixture';

let fixture: PoolFixture;
let layout: PoolLayout;

beforeEach(() => {
  fixture = new PoolFixture();
  layout = new PoolLayout(fixture.pool);
});

afterEach(async () => {
  await fixture.cleanup();
});

function spec(overrides: Partial<{ key: string; name: string; capacityBytes: number }> = {}) {
  return { key: randomKey(), name: 'pvc-1', capacityBytes: GI, parameters: { tier: 'fast' }, ...overrides };
}

function intent(op: Intent['op'], key: string, capacityBytes = GI): Intent {
  return { op, key, name: `pvc-${key}`, capacityBytes, parameters: {}, at: new Date().toISOString() };
}

describe('pool identity', () => {
  it('is written once and stays the same across reopening', async () => {
    const first = fixture.backend();
    const report = await first.open();
    expect(report).toMatchObject({ created: true, reconciled: [], strays: [] });
    expect(report.poolId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const identityText = fs.readFileSync(layout.identityFile, 'utf8');
    expect(JSON.parse(identityText)).toEqual({ poolId: report.poolId, createdAt: expect.any(String), backend: 'dir' });
    await first.close();

    const second = fixture.backend();
    const again = await second.open();
    expect(again).toMatchObject({ poolId: report.poolId, created: false });
    expect(fs.readFileSync(layout.identityFile, 'utf8')).toBe(identityText);
    expect((await second.status()).poolId).toBe(report.poolId);
  });

  it('refuses a pool created by another backend, and leaves it as it was', async () => {
    fs.mkdirSync(fixture.pool);
    const identity = {
      poolId: 'c0ffee00-0000-4000-8000-000000000000',
      createdAt: '2024-01-01T00:00:00Z',
      backend: 'loop',
    };
    fs.writeFileSync(layout.identityFile, JSON.stringify(identity));
    const before = fixture.tree();

    await expectDriverError(fixture.backend().open(), FailureType.FailedPrecondition, /loop backend/);
    expect(fixture.tree()).toEqual(before);
  });

  it('refuses pool paths that are relative or the filesystem root, and bad capacities', () => {
    for (const pool of ['pool', './pool', '/', '/tmp/..', '']) {
      expect(() => new DirBackend({ pool, capacityBytes: GI, quota: 'none' })).toThrow(
        expect.objectContaining({ type: FailureType.InvalidArgument }),
      );
    }
    for (const capacityBytes of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1]) {
      expect(() => new DirBackend({ pool: fixture.pool, capacityBytes, quota: 'none' })).toThrow(
        expect.objectContaining({ type: FailureType.InvalidArgument }),
      );
    }
  });
});

describe('createVolume', () => {
  it('allocates a directory and a record, and leaves the journal empty', async () => {
    const backend = await fixture.opened();
    const request = spec();
    const record = await backend.createVolume(request);

    expect(record).toEqual({ ...request, createdAt: expect.any(String), path: layout.volumeDir(request.key) });
    expect(path.isAbsolute(record.path)).toBe(true);
    expect(fs.statSync(record.path).isDirectory()).toBe(true);
    expect(fixture.list('records')).toEqual([`${request.key}.json`]);
    expect(fixture.list('journal')).toEqual([]);
    expect(await backend.getVolume(request.key)).toEqual(record);
  });

  it('is idempotent by key', async () => {
    const backend = await fixture.opened();
    const request = spec();
    const first = await backend.createVolume(request);
    const second = await backend.createVolume(request);

    expect(second).toEqual(first);
    expect(fixture.list('volumes')).toEqual([request.key]);
  });

  it('is idempotent by name: a compatible create under another key returns the first volume', async () => {
    const backend = await fixture.opened();
    const first = await backend.createVolume(spec({ name: 'pvc-a' }));
    const other = spec({ name: 'pvc-a' });
    const second = await backend.createVolume(other);

    expect(second).toEqual(first);
    expect(fixture.list('volumes')).toEqual([first.key]);
    expect(fixture.list('records')).toEqual([`${first.key}.json`]);
    expect(await backend.getVolume(other.key)).toBeUndefined();
  });

  it('creates one volume when the same name is requested under many keys at once', async () => {
    const backend = await fixture.opened();
    const records = await Promise.all(Array.from({ length: 8 }, () => backend.createVolume(spec({ name: 'pvc-x' }))));

    expect(new Set(records.map((record) => record.key)).size).toBe(1);
    expect(await backend.listVolumes()).toHaveLength(1);
  });

  it('answers AlreadyExists when the same key or name comes back with something else', async () => {
    const backend = await fixture.opened();
    const first = await backend.createVolume(spec({ name: 'pvc-a' }));
    const before = fixture.tree();

    await expectDriverError(
      backend.createVolume({ ...first, name: 'pvc-b' }),
      FailureType.AlreadyExists,
      /name \("pvc-a", requested "pvc-b"\)/,
    );
    await expectDriverError(
      backend.createVolume({ ...first, capacityBytes: 2 * GI }),
      FailureType.AlreadyExists,
      /capacity \(1Gi, requested 2Gi\)/,
    );
    await expectDriverError(
      backend.createVolume({ ...spec({ name: 'pvc-a' }), capacityBytes: GI + 1 }),
      FailureType.AlreadyExists,
      /capacity \(1Gi, requested 1073741825 bytes\)/,
    );
    await expectDriverError(
      backend.createVolume({ ...spec({ name: 'pvc-a' }), parameters: { tier: 'slow' } }),
      FailureType.AlreadyExists,
      /parameters/,
    );
    expect(fixture.tree()).toEqual(before);
  });

  it('reserves capacity and answers ResourceExhausted without leaving anything on disk', async () => {
    const backend = await fixture.opened(10 * GI);
    await backend.createVolume(spec({ name: 'big', capacityBytes: 6 * GI }));
    const before = fixture.tree();

    await expectDriverError(
      backend.createVolume(spec({ name: 'too-big', capacityBytes: 5 * GI })),
      FailureType.ResourceExhausted,
      /5Gi.*4Gi.*10Gi/,
    );
    expect(fixture.tree()).toEqual(before);
    expect(await backend.status()).toMatchObject({
      capacityBytes: 10 * GI,
      reservedBytes: 6 * GI,
      availableBytes: 4 * GI,
      volumeCount: 1,
    });

    await backend.createVolume(spec({ name: 'fits', capacityBytes: 4 * GI }));
    await backend.createVolume(spec({ name: 'empty', capacityBytes: 0 }));
    expect(await backend.status()).toMatchObject({ reservedBytes: 10 * GI, availableBytes: 0, volumeCount: 3 });
  });

  it('refuses a key whose directory exists without a record, and leaves that directory alone', async () => {
    const backend = await fixture.opened();
    const request = spec();
    fs.mkdirSync(layout.volumeDir(request.key));
    fs.writeFileSync(path.join(layout.volumeDir(request.key), 'data'), 'someone else');

    await expectDriverError(backend.createVolume(request), FailureType.FailedPrecondition, /without a record/);
    expect(fs.readFileSync(path.join(layout.volumeDir(request.key), 'data'), 'utf8')).toBe('someone else');
    expect(fixture.list('journal')).toEqual([]);
  });

  it('rejects invalid specs with InvalidArgument', async () => {
    const backend = await fixture.opened();
    const before = fixture.tree();
    const invalid: unknown[] = [
      { ...spec(), name: '' },
      { ...spec(), capacityBytes: -1 },
      { ...spec(), capacityBytes: 1.5 },
      { ...spec(), capacityBytes: Number.NaN },
      { ...spec(), parameters: { tier: 1 } },
      { ...spec(), parameters: null },
    ];
    for (const request of invalid) {
      await expectDriverError(
        backend.createVolume(request as Parameters<DirBackend['createVolume']>[0]),
        FailureType.InvalidArgument,
      );
    }
    expect(fixture.tree()).toEqual(before);
  });
});

describe('deleteVolume', () => {
  it('removes the volume, then answers existed: false', async () => {
    const backend = await fixture.opened();
    const record = await backend.createVolume(spec());
    fs.mkdirSync(path.join(record.path, 'nested'));
    fs.writeFileSync(path.join(record.path, 'nested', 'file'), 'data');

    expect(await backend.deleteVolume(record.key)).toEqual({ existed: true });
    expect(fixture.list('volumes')).toEqual([]);
    expect(fixture.list('records')).toEqual([]);
    expect(fixture.list('journal')).toEqual([]);
    expect(await backend.getVolume(record.key)).toBeUndefined();
    expect(await backend.deleteVolume(record.key)).toEqual({ existed: false });
    expect((await backend.status()).reservedBytes).toBe(0);
  });

  it('never follows a symbolic link out of the volume', async () => {
    const backend = await fixture.opened();
    const record = await backend.createVolume(spec());
    const outside = path.join(fixture.root, 'outside');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'keep'), 'precious');
    fs.symlinkSync(outside, path.join(record.path, 'link'));

    expect(await backend.deleteVolume(record.key)).toEqual({ existed: true });
    expect(fs.readFileSync(path.join(outside, 'keep'), 'utf8')).toBe('precious');
  });

  it('removes a directory that has no record when asked by key', async () => {
    const backend = await fixture.opened();
    const key = randomKey();
    fs.mkdirSync(layout.volumeDir(key));

    expect(await backend.deleteVolume(key)).toEqual({ existed: true });
    expect(fixture.exists('volumes', key)).toBe(false);
  });

  it('finishes a delete an earlier call left in the journal', async () => {
    const backend = await fixture.opened();
    const record = await backend.createVolume(spec());
    await writeIntent(layout, intent('delete', record.key));

    expect(await backend.deleteVolume(record.key)).toEqual({ existed: true });
    expect(fixture.list('volumes')).toEqual([]);
    expect(fixture.list('journal')).toEqual([]);
  });
});

describe('keys', () => {
  const badKeys = ['../x', 'ABC', '', `../${'a'.repeat(29)}`, 'A'.repeat(32), 'a'.repeat(31), 'a'.repeat(33)];

  it('are rejected with InvalidArgument without touching the pool', async () => {
    const backend = await fixture.opened();
    fs.writeFileSync(path.join(fixture.pool, 'x'), 'outside the volumes');
    const before = fixture.tree();

    for (const key of badKeys) {
      await expectDriverError(backend.createVolume(spec({ key })), FailureType.InvalidArgument, /32 lower-case hex/);
      await expectDriverError(backend.deleteVolume(key), FailureType.InvalidArgument);
      await expectDriverError(backend.getVolume(key), FailureType.InvalidArgument);
    }
    expect(fixture.tree()).toEqual(before);
  });

  it('are checked before anything else, even before the pool is opened', async () => {
    const backend = fixture.backend();
    for (const key of badKeys) {
      await expectDriverError(backend.deleteVolume(key), FailureType.InvalidArgument);
      await expectDriverError(backend.createVolume(spec({ key })), FailureType.InvalidArgument);
    }
    expect(fs.existsSync(fixture.pool)).toBe(false);
  });
});

describe('open() after a crash', () => {
  it('rolls back a create that wrote no record', async () => {
    const crashed = await fixture.opened();
    const key = randomKey();
    await writeIntent(layout, intent('create', key, 3 * GI));
    fs.mkdirSync(layout.volumeDir(key));
    fs.writeFileSync(path.join(layout.volumeDir(key), 'partial'), '');
    // Until it is settled, the create holds its reservation.
    expect((await crashed.status()).reservedBytes).toBe(3 * GI);

    const restarted = fixture.backend();
    const report = await restarted.open();
    expect(report.reconciled).toEqual([{ key, op: 'create', outcome: 'rolled-back' }]);
    expect(report.strays).toEqual([]);
    expect(fixture.list('volumes')).toEqual([]);
    expect(fixture.list('journal')).toEqual([]);
    expect((await restarted.status()).reservedBytes).toBe(0);
  });

  it('keeps a create that wrote its record', async () => {
    const crashed = await fixture.opened();
    const key = randomKey();
    await writeIntent(layout, intent('create', key));
    fs.mkdirSync(layout.volumeDir(key));
    const stored = { key, name: `pvc-${key}`, capacityBytes: GI, parameters: {}, createdAt: new Date().toISOString() };
    await writeRecord(layout, stored);
    // Counted once, not once for the record and again for the intent.
    expect((await crashed.status()).reservedBytes).toBe(GI);

    const restarted = fixture.backend();
    const report = await restarted.open();
    expect(report.reconciled).toEqual([{ key, op: 'create', outcome: 'kept' }]);
    expect(await restarted.getVolume(key)).toEqual({ ...stored, path: layout.volumeDir(key) });
    expect(fixture.list('journal')).toEqual([]);
    expect((await restarted.status()).reservedBytes).toBe(GI);
  });

  it('completes a delete, whether or not the directory was already gone', async () => {
    const crashed = await fixture.opened();
    const untouched = await crashed.createVolume(spec({ name: 'a' }));
    const halfDeleted = await crashed.createVolume(spec({ name: 'b' }));
    await writeIntent(layout, intent('delete', untouched.key));
    await writeIntent(layout, intent('delete', halfDeleted.key));
    fs.rmSync(halfDeleted.path, { recursive: true });

    const restarted = fixture.backend();
    const report = await restarted.open();
    expect(report.reconciled).toEqual(
      [untouched.key, halfDeleted.key].sort().map((key) => ({ key, op: 'delete', outcome: 'completed' })),
    );
    expect(report.strays).toEqual([]);
    expect(await restarted.listVolumes()).toEqual([]);
    expect(fixture.list('volumes')).toEqual([]);
    expect(fixture.list('records')).toEqual([]);
    expect(fixture.list('journal')).toEqual([]);
  });

  it('reports strays without deleting them, and removes only its own temporary files', async () => {
    const backend = await fixture.opened();
    const dirWithoutRecord = randomKey();
    const recordWithoutDir = randomKey();
    fs.mkdirSync(layout.volumeDir(dirWithoutRecord));
    fs.writeFileSync(path.join(layout.volumeDir(dirWithoutRecord), 'data'), 'keep me');
    fs.mkdirSync(path.join(layout.volumesDir, 'not-a-key'));
    await writeRecord(layout, {
      key: recordWithoutDir,
      name: 'orphan',
      capacityBytes: GI,
      parameters: {},
      createdAt: new Date().toISOString(),
    });
    fs.writeFileSync(path.join(layout.journalDir, 'notes.txt'), 'not an intent');
    const leftover = `.${randomKey()}.json.00000000-0000-4000-8000-000000000000.tmp`;
    fs.writeFileSync(path.join(layout.recordsDir, leftover), '{');
    await backend.close();

    const report = await fixture.backend().open();
    expect(report.reconciled).toEqual([]);
    expect(report.strays).toEqual(
      [
        layout.volumeDir(dirWithoutRecord),
        path.join(layout.volumesDir, 'not-a-key'),
        layout.recordFile(recordWithoutDir),
        path.join(layout.journalDir, 'notes.txt'),
      ].sort(),
    );
    expect(fs.readFileSync(path.join(layout.volumeDir(dirWithoutRecord), 'data'), 'utf8')).toBe('keep me');
    expect(fixture.exists('volumes', 'not-a-key')).toBe(true);
    expect(fixture.exists('records', `${recordWithoutDir}.json`)).toBe(true);
    expect(fixture.exists('journal', 'notes.txt')).toBe(true);
    expect(fixture.exists('records', leftover)).toBe(false);
  });
});

describe('pool lock', () => {
  let child: ChildProcess | undefined;

  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
    child = undefined;
  });

  async function startSleeper(): Promise<number> {
    child = spawn(process.execPath, ['-e', 'setTimeout(()=>{},10000)'], { stdio: 'ignore' });
    await once(child, 'spawn');
    if (child.pid === undefined) throw new Error('no pid for the child process');
    return child.pid;
  }

  it('is refused while a live process holds it and taken over once that process is dead', async () => {
    const pid = await startSleeper();
    fs.mkdirSync(fixture.pool);
    fs.writeFileSync(layout.lockFile, `${pid}\n`);

    await expectDriverError(fixture.backend().open(), FailureType.FailedPrecondition, new RegExp(`process ${pid}$`));
    expect(fs.readFileSync(layout.lockFile, 'utf8')).toBe(`${pid}\n`);

    const exited = once(child!, 'exit');
    child!.kill('SIGKILL');
    await exited;

    const backend = fixture.backend();
    await backend.open();
    expect(fs.readFileSync(layout.lockFile, 'utf8').split('\n')[0]).toBe(String(process.pid));
    await backend.close();
    expect(fs.existsSync(layout.lockFile)).toBe(false);
  });

  it('takes over a lock file that names no process', async () => {
    fs.mkdirSync(fixture.pool);
    fs.writeFileSync(layout.lockFile, '');

    await fixture.opened();
    expect(fs.readFileSync(layout.lockFile, 'utf8').split('\n')[0]).toBe(String(process.pid));
  });

  it('is not released by a backend whose lock was taken over', async () => {
    const crashed = await fixture.opened();
    await fixture.opened();
    await crashed.close();

    expect(fs.existsSync(layout.lockFile)).toBe(true);
  });
});

describe('lifecycle', () => {
  it('refuses calls before open() and after close()', async () => {
    const backend = fixture.backend();
    await expectDriverError(backend.status(), FailureType.FailedPrecondition, /not open/);
    await expectDriverError(backend.listVolumes(), FailureType.FailedPrecondition, /not open/);

    await backend.open();
    await backend.close();
    await expectDriverError(backend.createVolume(spec()), FailureType.FailedPrecondition, /not open/);
  });

  it('lists volumes sorted by key', async () => {
    const backend = await fixture.opened();
    const keys = ['f'.repeat(32), '0'.repeat(32), '7'.repeat(32)];
    for (const [index, key] of keys.entries()) await backend.createVolume(spec({ key, name: `pvc-${index}` }));

    expect((await backend.listVolumes()).map((record) => record.key)).toEqual([...keys].sort());
  });
});
