/**
 * issue 21 item 7, the parts that need no quota-capable kernel: whether a mount enforces project quotas and what
 * the refusal says; how a volume's project ID is chosen; and the dir backend's use of its project quotas (a
 * recording fake) through create, expand, delete, a crash part way and open. test/integration/dir-quota.test.ts
 * runs the same on real XFS and ext4.
 */
import fs from 'node:fs';
import { FailureType } from '../../../common/failures';
import {
  DirBackend,
  assertProjectQuotas,
  missingProjectQuota,
  projectQuotaRefusal,
  FIRST_PROJECT_ID,
  XfsProjectQuotas,
  chooseProjectId,
  projectIdCandidate,
  type ProjectQuotas,
} from '../../../storage/dir/dir-backend';
import { runTool } from '../../../storage/host/tools';
import { readIntent, writeIntent } from '../../../storage/pool/journal';
import { PoolLayout } from '../../../storage/pool/pool-layout';
import { LAST_PROJECT_ID, readRecord, writeRecord } from '../../../storage/pool/records';
import { expectDriverError } from '../../support/driver-error';
import { GI, PoolFixture, randomKey } from './pool-fixture';

const MiB = 1024 ** 2;

describe('missingProjectQuota', () => {
  it.each([
    ['xfs', 'rw,relatime,attr2,inode64,prjquota'],
    ['xfs', 'rw,pquota'],
    ['ext4', 'rw,relatime,prjquota'],
  ])('%s with %s enforces', (fsType, options) => {
    expect(missingProjectQuota({ fsType, superOptions: options.split(',') })).toBeUndefined();
  });

  it('says what to do for each filesystem that does not', () => {
    const missing = (fsType: string, options: string) =>
      missingProjectQuota({ fsType, superOptions: options.split(',') });
    expect(missing('xfs', 'rw,inode64,noquota')).toMatch(/mount the XFS filesystem with -o prjquota/);
    expect(missing('xfs', 'rw,inode64,pqnoenforce')).toMatch(/accounted but not enforced.*-o prjquota/);
    expect(missing('xfs', 'rw,usrquota,grpquota')).toMatch(/-o prjquota/);
    expect(missing('ext4', 'rw,relatime,usrquota')).toMatch(/tune2fs -O quota,project.*-o prjquota/);
    expect(missing('overlay', 'rw,lowerdir=/a')).toMatch(/need XFS or ext4/);
    expect(missing('tmpfs', 'rw,prjquota')).toMatch(/need XFS or ext4/);
  });

  it('the refusal names the pool, its filesystem and mount, what is missing, and --dir-quota=none', () => {
    const message = projectQuotaRefusal('/var/lib/pool', { fsType: 'xfs', mountPoint: '/var' }, 'mount it so');
    expect(message).toBe(
      '--dir-quota=project: pool /var/lib/pool is on the xfs filesystem mounted at /var, which does not enforce ' +
        'project quotas, so a volume could fill it: mount it so. For development only, --dir-quota=none runs the ' +
        'dir backend without enforcing volume sizes.',
    );
  });

  it('a real temporary directory (no project quotas here) is refused, before the pool exists too', async () => {
    const fixture = new PoolFixture();
    try {
      const error = await assertProjectQuotas(`${fixture.pool}/not/yet`).then(
        () => undefined,
        (reason: unknown) => reason as Error,
      );
      expect(error?.message).toMatch(/^--dir-quota=project: pool .*\/not\/yet is on the \S+ filesystem mounted at \//);
      expect(error?.message).toContain('--dir-quota=none');
      expect(fs.existsSync(fixture.pool)).toBe(false);
    } finally {
      await fixture.cleanup();
    }
  });
});

describe('XfsProjectQuotas', () => {
  it('refuses at start a pool path that xfs_quota would split', async () => {
    await expectDriverError(
      new XfsProjectQuotas('/var/lib/my pool').check(),
      FailureType.FailedPrecondition,
      /needs a pool path without white space, quotes or backslashes: "\/var\/lib\/my pool"/,
    );
  });
});

describe('project IDs', () => {
  it('derive from the key, inside the driver range', () => {
    expect(projectIdCandidate('00000000' + '0'.repeat(24))).toBe(FIRST_PROJECT_ID);
    for (let i = 0; i < 50; i++) {
      const id = projectIdCandidate(randomKey());
      expect(id).toBeGreaterThanOrEqual(FIRST_PROJECT_ID);
      expect(id).toBeLessThanOrEqual(LAST_PROJECT_ID);
    }
  });

  it('skip IDs the pool holds and IDs the filesystem charges anything to', async () => {
    const key = randomKey();
    const first = projectIdCandidate(key);
    const busy = new Set([first + 1]);
    const quotas = { isFree: async (id: number) => !busy.has(id) } as ProjectQuotas;
    expect(await chooseProjectId(quotas, key, new Set())).toBe(first);
    expect(await chooseProjectId(quotas, key, new Set([first]))).toBe(first + 2);
    const none = { isFree: async () => false } as unknown as ProjectQuotas;
    await expectDriverError(chooseProjectId(none, key, new Set()), FailureType.Internal, /no free project ID/);
  });
});

describe('runTool with stderrFails (xfs_quota exits 0 on many failures)', () => {
  it('fails on output to stderr even with exit code 0', async () => {
    const script = 'echo "xfs_quota: cannot set limits: Function not implemented" >&2';
    await expect(runTool('sh', ['-c', script], { stderrFails: true })).rejects.toThrow(/Function not implemented/);
    expect(await runTool('sh', ['-c', `${script}; echo out`])).toBe('out\n');
  });
});

/** Project quotas as a table, with every call recorded. */
class FakeQuotas implements ProjectQuotas {
  readonly calls: string[] = [];
  readonly limits = new Map<number, number>();
  readonly projects = new Map<string, number>();
  checked = 0;
  refuse: string | undefined;
  failLimit = false;

  async check(): Promise<void> {
    this.checked++;
    if (this.refuse) throw new Error(this.refuse);
  }
  async isFree(id: number): Promise<boolean> {
    return !this.limits.has(id) && ![...this.projects.values()].includes(id);
  }
  async assign(dir: string, id: number): Promise<void> {
    this.calls.push(`assign ${id}`);
    this.projects.set(dir, id);
  }
  async setLimit(id: number, bytes: number): Promise<void> {
    this.calls.push(`limit ${id} ${bytes}`);
    if (this.failLimit) throw new Error('limit failed');
    this.limits.set(id, bytes);
  }
  async clearLimit(id: number): Promise<void> {
    this.calls.push(`clear ${id}`);
    this.limits.delete(id);
  }
}

describe('DirBackend with --dir-quota=project', () => {
  let quotas: FakeQuotas;
  let fixture: PoolFixture;
  let layout: PoolLayout;

  beforeEach(() => {
    quotas = new FakeQuotas();
    fixture = new PoolFixture((options) => new DirBackend({ ...options, quota: 'project', projectQuotas: quotas }));
    layout = new PoolLayout(fixture.pool);
  });
  afterEach(() => fixture.cleanup());

  const spec = (key = randomKey()) => ({
    key,
    name: `pvc-${key}`,
    capacityBytes: 64 * MiB,
    parameters: {},
  });

  it('refuses to open when the filesystem does not enforce, touching nothing', async () => {
    quotas.refuse = 'no project quotas here';
    await expect(fixture.backend().open()).rejects.toThrow('no project quotas here');
    expect(fs.existsSync(fixture.pool)).toBe(false);
  });

  it('a volume is a project with a limit of its capacity; expansion raises it; delete clears it', async () => {
    const backend = await fixture.opened();
    const request = spec();
    const volume = await backend.createVolume(request);
    const id = projectIdCandidate(request.key);
    expect(volume.projectId).toBe(id);
    expect((await readRecord(layout, request.key))?.projectId).toBe(id);
    expect(quotas.projects.get(layout.volumeDir(request.key))).toBe(id);
    expect(quotas.calls).toEqual([`assign ${id}`, `limit ${id} ${64 * MiB}`]);

    await backend.expandVolume(request.key, 128 * MiB);
    expect(quotas.limits.get(id)).toBe(128 * MiB);
    // Shrinking is not expansion: nothing changes.
    await backend.expandVolume(request.key, 32 * MiB);
    expect(quotas.limits.get(id)).toBe(128 * MiB);

    expect(await backend.deleteVolume(request.key)).toEqual({ existed: true });
    expect(quotas.limits.has(id)).toBe(false);
    expect(quotas.calls.at(-1)).toBe(`clear ${id}`);
    expect(fs.existsSync(layout.volumeDir(request.key))).toBe(false);
  });

  it('two volumes whose keys start alike get different projects', async () => {
    const backend = await fixture.opened();
    const a = await backend.createVolume(spec(`abcdef01${'0'.repeat(24)}`));
    const b = await backend.createVolume(spec(`abcdef01${'1'.repeat(24)}`));
    expect(b.projectId).toBe((a.projectId ?? 0) + 1);
  });

  it('a create that failed part way is rolled back, its limit cleared, from the project in its intent', async () => {
    const backend = await fixture.opened();
    quotas.failLimit = true;
    const request = spec();
    await expect(backend.createVolume(request)).rejects.toThrow('limit failed');
    expect(quotas.calls.at(-1)).toBe(`clear ${projectIdCandidate(request.key)}`);
    expect(fixture.list('journal')).toEqual([]);
    expect(fixture.list('volumes')).toEqual([]);
  });

  it('at open: a crash after the intent clears its project; limits are set again from the records', async () => {
    const first = await fixture.opened();
    const kept = await first.createVolume(spec());
    await first.expandVolume(kept.key, 96 * MiB);
    await first.close();
    // A crash after the create's intent named project 4242 (and its limit was set), before the record.
    const crashed = randomKey();
    const at = new Date().toISOString();
    await writeIntent(layout, {
      op: 'create',
      key: crashed,
      name: 'x',
      capacityBytes: GI,
      parameters: {},
      at,
      projectId: 4242,
    });
    expect((await readIntent(layout, crashed))?.projectId).toBe(4242);
    fs.mkdirSync(layout.volumeDir(crashed));
    quotas.limits.set(4242, GI);
    // And a crash between growing a limit and writing the record left it larger than the record says.
    quotas.limits.set(kept.projectId ?? 0, 200 * MiB);
    quotas.calls.length = 0;

    const report = await fixture.opened();
    expect(await report.status()).toMatchObject({ volumeCount: 1 });
    expect(quotas.limits.has(4242)).toBe(false);
    expect(quotas.limits.get(kept.projectId ?? 0)).toBe(96 * MiB);
    expect(quotas.calls).toEqual(['clear 4242', `limit ${kept.projectId} ${96 * MiB}`]);
  });

  it('at open: a volume made under --dir-quota=none is given a project and reported', async () => {
    const key = randomKey();
    fs.mkdirSync(layout.volumesDir, { recursive: true });
    const plain = new DirBackend({ pool: fixture.pool, capacityBytes: 10 * GI, quota: 'none' });
    await plain.open();
    await plain.createVolume(spec(key));
    await plain.close();

    const backend = fixture.backend();
    const report = await backend.open();
    const id = projectIdCandidate(key);
    expect(report.repaired).toEqual([
      { key, outcome: 'limited', message: `given project ${id} with a limit of 64Mi (it had none)` },
    ]);
    expect((await readRecord(layout, key))?.projectId).toBe(id);
    expect(quotas.limits.get(id)).toBe(64 * MiB);
    // Once given, it is kept: the next open only sets the limit again.
    await backend.close();
    await expect((await fixture.opened()).listVolumes()).resolves.toEqual([
      expect.objectContaining({ key, projectId: id }),
    ]);
  });

  it('--dir-quota=none makes no project and never calls the quotas', async () => {
    const plain = new DirBackend({ pool: fixture.pool, capacityBytes: GI, quota: 'none', projectQuotas: quotas });
    await plain.open();
    const volume = await plain.createVolume(spec());
    await plain.expandVolume(volume.key, 128 * MiB);
    await plain.deleteVolume(volume.key);
    await plain.close();
    expect(volume.projectId).toBeUndefined();
    expect(quotas.calls).toEqual([]);
    expect(quotas.checked).toBe(0);
  });

  it('a record with a bad project ID is refused as not a record', async () => {
    const backend = await fixture.opened();
    const volume = await backend.createVolume(spec());
    const { path: _path, ...stored } = volume;
    await writeRecord(layout, { ...stored, projectId: 0 });
    await expectDriverError(backend.getVolume(volume.key), FailureType.Internal, /is not a volume record/);
  });
});
