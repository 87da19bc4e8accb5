/**
 * issue 21 item 7 on real filesystems: a dir volume's size is enforced by a project quota of the pool's XFS or
 * ext4 (loop-mounted images, `-o prjquota`), and a node agent with --dir-quota=project (the default) refuses to
 * start on a filesystem that does not enforce project quotas.
 *
 * A kernel built without quota support (CONFIG_XFS_QUOTA, CONFIG_QFMT_V2 off, as in some sandboxes) cannot mount
 * `-o prjquota` at all. The enforcement test then checks that this is the reason (from the kernel's config) and
 * that the same filesystem mounted without the option is refused; any other mount failure fails the test.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { DEV_NODE_FLAGS } from '../../agent/dev-node-flags';
import { DirBackend, assertProjectQuotas, XfsProjectQuotas } from '../../storage/dir/dir-backend';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster, probe, type ManagedProcess } from '../support/cluster';
import { runCli } from '../support/run-cli';
import { releaseMountsUnder } from '../unit/storage/mount-helpers';
import { eventually } from '../support/eventually';

const MiB = 1024 ** 2;

/** The running kernel's build options, or undefined when neither /proc/config.gz nor /boot has them. */
function kernelConfig(): string | undefined {
  try {
    return gunzipSync(fs.readFileSync('/proc/config.gz')).toString('utf8');
  } catch {
    try {
      return fs.readFileSync(`/boot/config-${os.release()}`, 'utf8');
    } catch {
      return undefined;
    }
  }
}

/** Writes `bytes` of zeros to file in 1 MiB chunks (with fsync); returns how much was written and the error that stopped it. */
function fill(file: string, bytes: number): { written: number; code?: string } {
  const chunk = Buffer.alloc(MiB);
  const fd = fs.openSync(file, 'a');
  let written = 0;
  try {
    while (written < bytes) {
      written += fs.writeSync(fd, chunk, 0, Math.min(MiB, bytes - written));
    }
    fs.fsyncSync(fd);
    return { written };
  } catch (error) {
    return { written, code: (error as NodeJS.ErrnoException).code };
  } finally {
    fs.closeSync(fd);
  }
}

interface Filesystem {
  fsType: 'xfs' | 'ext4';
  /** mkfs for a filesystem that can have project quotas. */
  mkfs: string[];
  /** The kernel options without which `-o prjquota` cannot be mounted. */
  kernelNeeds: string[];
}

const FILESYSTEMS: Filesystem[] = [
  { fsType: 'xfs', mkfs: ['mkfs.xfs', '-q'], kernelNeeds: ['CONFIG_XFS_QUOTA'] },
  { fsType: 'ext4', mkfs: ['mkfs.ext4', '-q', '-O', 'quota,project'], kernelNeeds: ['CONFIG_QUOTA', 'CONFIG_QFMT_V2'] },
];

describe.each(FILESYSTEMS)('$fsType', ({ fsType, mkfs, kernelNeeds }) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `durable-csi-quota-${fsType}-`));
  const image = path.join(root, 'fs.img');
  const mountPoint = path.join(root, 'mnt');
  let mountError = '';

  beforeAll(() => {
    fs.mkdirSync(mountPoint);
    fs.writeFileSync(image, '');
    fs.truncateSync(image, 512 * MiB);
    execFileSync(mkfs[0] ?? '', [...mkfs.slice(1), image]);
    try {
      execFileSync('mount', ['-o', 'loop,prjquota', image, mountPoint], { stdio: 'pipe' });
    } catch (error) {
      mountError = String((error as { stderr?: Buffer }).stderr ?? error);
    }
  });

  afterAll(() => {
    releaseMountsUnder(root);
    fs.rmSync(root, { recursive: true, force: true });
  });

  it(`enforces a volume's size with a project quota: 64 MiB holds no 80 MiB, expansion to 128 MiB lets more in, delete clears the project`, async () => {
    if (mountError) {
      // Allowed only where the kernel really cannot: then a filesystem without the option must be refused.
      const config = kernelConfig();
      expect(config).toBeDefined();
      const missing = kernelNeeds.filter((option) => !new RegExp(`^${option}=[ym]$`, 'm').test(config ?? ''));
      expect(missing).not.toEqual([]);
      process.stderr.write(
        `dir-quota.test: ${fsType} -o prjquota cannot be mounted here (kernel without ${missing.join(', ')}); ` +
          `checked the refusal instead\n`,
      );
      const plain = path.join(root, 'plain.img');
      fs.writeFileSync(plain, '');
      fs.truncateSync(plain, 512 * MiB);
      execFileSync(fsType === 'xfs' ? 'mkfs.xfs' : 'mkfs.ext4', ['-q', plain]);
      execFileSync('mount', ['-o', 'loop', plain, mountPoint]);
      const refusal = fsType === 'xfs' ? /mount the XFS filesystem with -o prjquota/ : /tune2fs -O quota,project/;
      await expect(assertProjectQuotas(path.join(mountPoint, 'pool'))).rejects.toThrow(refusal);
      return;
    }
    const pool = path.join(mountPoint, 'pool');
    const backend = new DirBackend({ pool, capacityBytes: 400 * MiB, quota: 'project' });
    await backend.open();
    try {
      const key = 'a1'.repeat(16);
      const volume = await backend.createVolume({ key, name: 'pvc-quota', capacityBytes: 64 * MiB, parameters: {} });
      expect(volume.projectId).toBeDefined();
      const file = path.join(volume.path, 'data');

      const first = fill(file, 80 * MiB);
      expect(['EDQUOT', 'ENOSPC']).toContain(first.code);
      expect(first.written).toBeLessThanOrEqual(64 * MiB);
      expect(first.written).toBeGreaterThan(60 * MiB);

      await backend.expandVolume(key, 128 * MiB);
      const second = fill(file, 40 * MiB);
      expect(second).toEqual({ written: 40 * MiB });
      // The kernel reports a project directory's limit as its filesystem's size (what NodeGetVolumeStats reads).
      const stats = fs.statfsSync(volume.path);
      expect(stats.blocks * stats.bsize).toBe(128 * MiB);

      await backend.deleteVolume(key);
      expect(fs.existsSync(volume.path)).toBe(false);
      expect(await new XfsProjectQuotas(pool).isFree(volume.projectId ?? 0)).toBe(true);
    } finally {
      await backend.close();
    }
  });
});

describe('durable-csi node --backend dir', () => {
  const cluster = new TestCluster('dir-quota');
  afterAll(() => cluster.teardown());

  const nodeArgs = (name: string) => [
    'node',
    ...['--endpoint', `unix://${path.join(cluster.root, `${name}.sock`)}`, '--node-id', name],
    ...['--driver-name', cluster.driverName, '--pool', cluster.pool(name), '--temporal-address', '127.0.0.1:1'],
  ];

  it('on a plain directory (the disk not mounted yet) serves kubelet, stays not ready saying why, and makes nothing', async () => {
    const pool = cluster.pool('unmounted');
    fs.mkdirSync(pool, { recursive: true }); // what deploy/'s DirectoryOrCreate leaves on the root filesystem
    const health = await findFreePort();
    const node = await cluster.startNode('unmounted', {
      waitReady: false,
      extra: ['--dir-quota=project', '--health-address', `127.0.0.1:${health}`],
    });
    const clients = cluster.csi(node.endpoint);
    const reason = await eventually(
      '/readyz refusing without project quotas',
      async () => {
        stillRunning(node);
        const body = await readyz(health).catch(() => undefined);
        return body?.status === 503 && body.text.includes('does not enforce project quotas') ? body.text : undefined;
      },
      30_000,
    );
    expect(reason).toMatch(new RegExp(`--dir-quota=project: pool ${pool} is on the \\S+ filesystem mounted at /`));
    expect(reason).toContain('--dir-quota=none');
    expect(await probe(clients)).toBe(false); // kubelet is answered: not ready, not gone
    expect(node.child.exitCode).toBeNull();
    expect(fs.readdirSync(pool)).toEqual([]);
    await node.stop();
  });

  it('rejects an unknown mode', async () => {
    const result = await runCli([...nodeArgs('bad-mode'), '--dir-quota', 'soft']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/--dir-quota <mode>' argument 'soft' is invalid. Allowed choices are project, none/);
  });

  it('with --dir-quota=none (what the dev stack and the tests pass) starts and warns that sizes are not enforced', async () => {
    expect(DEV_NODE_FLAGS).toEqual(['--dir-quota', 'none']);
    const node = await cluster.startNode('warned', { waitReady: false });
    await eventually('the warning that sizes are not enforced', () =>
      fs.readFileSync(cluster.log('warned'), 'utf8').includes('volume sizes are reserved, not enforced'),
    );
    expect(node.child.exitCode).toBeNull();
    await node.stop();
  });

  it('--help says the loop backend ignores --dir-quota', async () => {
    const result = await runCli(['node', '--help']);
    const help = result.stdout.replace(/\s+/g, ' ');
    expect(help).toMatch(/--dir-quota <mode> dir backend only \(the loop backend ignores it\)/);
    expect(help).toContain('(choices: "project", "none", default: "project")');
  });
});

/**
 * After a reboot the pool's disk may be mounted after the agent starts (issue 33 item 13): the agent must not
 * crash-loop meanwhile (kubelet would be unserved), and must find the disk once it is there.
 */
describe('durable-csi node --dir-quota=project whose pool disk is mounted late', () => {
  const cluster = new TestCluster('dir-quota-late');
  const disk = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-late-disk-'));
  let node: ManagedProcess | undefined;
  afterAll(async () => {
    await node?.stop();
    releaseMountsUnder(cluster.root);
    releaseMountsUnder(disk);
    fs.rmSync(disk, { recursive: true, force: true });
    await cluster.teardown();
  });

  it('serves kubelet not ready until then, looks again every 10 s, and opens the pool on the disk', async () => {
    const pool = cluster.pool('late');
    fs.mkdirSync(pool, { recursive: true });
    const health = await findFreePort();
    node = await cluster.startNode('late', {
      waitReady: false,
      extra: ['--dir-quota=project', '--health-address', `127.0.0.1:${health}`],
    });
    const started = node;
    await eventually(
      '/readyz naming project quotas',
      async () => {
        stillRunning(started);
        return (await readyz(health).catch(() => undefined))?.text.includes('project quotas');
      },
      30_000,
    );
    expect(await probe(cluster.csi(node.endpoint))).toBe(false);

    // The disk arrives: XFS, mounted with project quotas where the kernel can.
    const image = path.join(disk, 'pool.img');
    fs.writeFileSync(image, '');
    fs.truncateSync(image, 512 * MiB);
    execFileSync('mkfs.xfs', ['-q', image]);
    let mountError = '';
    try {
      execFileSync('mount', ['-o', 'loop,prjquota', image, pool], { stdio: 'pipe' });
    } catch (error) {
      mountError = String((error as { stderr?: Buffer }).stderr ?? error);
    }
    if (!mountError) {
      await eventually('ready', async () => (await readyz(health).catch(() => undefined))?.status === 200, 60_000);
      expect(fs.existsSync(path.join(pool, 'pool.json'))).toBe(true);
      return;
    }
    // Where the kernel cannot enforce XFS project quotas (checked, not assumed), the disk is mounted without them:
    // the agent, still up, has looked again and names the filesystem now holding the pool.
    expect(kernelConfig()).not.toMatch(/^CONFIG_XFS_QUOTA=[ym]$/m);
    process.stderr.write('dir-quota.test: XFS -o prjquota cannot be mounted here; checked the agent looks again\n');
    execFileSync('mount', ['-o', 'loop', image, pool]);
    const refusal = await eventually(
      '/readyz refusing the mount',
      async () => {
        const body = await readyz(health).catch(() => undefined);
        return body?.text.includes(`xfs filesystem mounted at ${pool}`) ? body.text : undefined;
      },
      30_000,
    );
    expect(refusal).toContain('mount the XFS filesystem with -o prjquota');
    expect(node.child.exitCode).toBeNull();
    expect(fs.readdirSync(pool)).toEqual([]);
  });
});

/** The agent must stay up (kubelet is served): a crash-looping agent fails the test with its exit. */
function stillRunning(node: ManagedProcess): void {
  const { exitCode, signalCode } = node.child;
  if (exitCode !== null || signalCode !== null) throw new Error(`the agent exited (${signalCode ?? exitCode})`);
}

/** The agent's /readyz: 200 when ready, else 503 with why not. */
async function readyz(port: number): Promise<{ status: number; text: string }> {
  const response = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: response.status, text: await response.text() };
}
