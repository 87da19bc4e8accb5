/**
 * issue 21, items 4-6: what a caller of the Node service (kubelet, or anyone who reaches its socket) can make the
 * agent do as root. Real gRPC over a unix socket, real dir and loop backends, real mounts and loop devices.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { ServiceError } from '@grpc/grpc-js';
import { createLogger } from '../../../common/logger';
import { formatVolumeId, poolIdPrefix } from '../../../common/names';
import { call, connectCsi, withDeadline, type CsiClients } from '../../../csi/client';
import type { VolumeCapability } from '../../../csi/generated/csi/v1/VolumeCapability';
import { createIdentityService } from '../../../csi/identity-service';
import { createNodeService } from '../../../csi/node-service';
import type { NodeContext } from '../../../csi/node-requests';
import { serveCsi, type RunningServer } from '../../../csi/server';
import type { StorageBackend } from '../../../storage/pool/backend';
import { LoopBackend } from '../../../storage/loop/loop-backend';
import { readMounts } from '../../../storage/host/mounts';
import { GI, PoolFixture, randomKey } from '../storage/pool-fixture';

const MiB = 1024 ** 2;
const NODE = 'node-1';

interface Served {
  fixture: PoolFixture<StorageBackend>;
  kubelet: string;
  clients: CsiClients;
  server: RunningServer;
  backend: StorageBackend;
  poolId: string;
}

let served: Served | undefined;

async function serve(kind: 'dir' | 'loop'): Promise<Served> {
  const fixture =
    kind === 'loop'
      ? new PoolFixture<StorageBackend>((options) => new LoopBackend(options), 'loop')
      : new PoolFixture<StorageBackend>();
  const backend = fixture.backend(10 * GI);
  const { poolId } = await backend.open();
  const kubelet = path.join(fixture.root, 'kubelet');
  fs.mkdirSync(kubelet);
  const endpoint = `unix://${path.join(fixture.root, 'node.sock')}`;
  const logger = createLogger('test', 'silent');
  const server = await serveCsi(
    endpoint,
    {
      identity: createIdentityService({ driverName: 'test.durable-csi.io', version: '0', ready: async () => true }),
      node: createNodeService({ nodeId: NODE, poolId: () => poolId, backend, kubeletDir: kubelet } as NodeContext),
    },
    logger,
  );
  served = { fixture, kubelet, clients: connectCsi(endpoint), server, backend, poolId };
  return served;
}

afterEach(async () => {
  if (!served) return;
  served.clients.close();
  await served.server.close();
  await served.fixture.cleanup();
  served = undefined;
});

async function newVolume(s: Served, accessType: 'mount' | 'block' = 'mount'): Promise<string> {
  const key = randomKey();
  await s.backend.createVolume({
    key,
    name: `pvc-${key.slice(0, 8)}`,
    capacityBytes: 64 * MiB,
    parameters: {},
    accessType,
  });
  return formatVolumeId({ nodeId: NODE, poolIdPrefix: poolIdPrefix(s.poolId), key });
}

const mount = (flags: string[] = [], fsType = ''): VolumeCapability => ({
  mount: { fs_type: fsType, mount_flags: flags },
  access_mode: { mode: 'SINGLE_NODE_WRITER' },
});
const BLOCK: VolumeCapability = { block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' } };

function stage(s: Served, volumeId: string, stagingPath: string, capability = mount()) {
  return call<object>((done) =>
    s.clients.node.NodeStageVolume(
      { volume_id: volumeId, staging_target_path: stagingPath, volume_capability: capability },
      withDeadline(),
      done,
    ),
  );
}

function publish(
  s: Served,
  volumeId: string,
  stagingPath: string,
  target: string,
  capability = mount(),
  readonly = false,
) {
  return call<object>((done) =>
    s.clients.node.NodePublishVolume(
      {
        volume_id: volumeId,
        staging_target_path: stagingPath,
        target_path: target,
        volume_capability: capability,
        readonly,
      },
      withDeadline(),
      done,
    ),
  );
}

function unpublish(s: Served, volumeId: string, target: string) {
  return call<object>((done) =>
    s.clients.node.NodeUnpublishVolume({ volume_id: volumeId, target_path: target }, withDeadline(), done),
  );
}

function unstage(s: Served, volumeId: string, stagingPath: string) {
  return call<object>((done) =>
    s.clients.node.NodeUnstageVolume({ volume_id: volumeId, staging_target_path: stagingPath }, withDeadline(), done),
  );
}

async function refusal(promise: Promise<unknown>): Promise<{ code: string; details: string }> {
  const error = await promise.then(
    () => undefined,
    (reason: ServiceError) => reason,
  );
  if (!error) return { code: 'OK', details: '' };
  const { status } = await import('@grpc/grpc-js');
  return { code: status[error.code], details: error.details };
}

async function optionsAt(target: string): Promise<string[]> {
  const real = fs.realpathSync(target);
  const line = fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((entry) => entry.split(' ')[4] === real)
    .pop();
  expect((await readMounts()).some((entry) => entry.mountPoint === real)).toBe(true);
  return (line?.split(' ')[5] ?? '').split(',');
}

/** A directory beside the kubelet directory, and `<kubelet>/link` pointing at it. */
function outsideWithLink(s: Served): string {
  const outside = path.join(s.fixture.root, 'elsewhere');
  fs.mkdirSync(outside);
  fs.symlinkSync(outside, path.join(s.kubelet, 'link'));
  return outside;
}

describe('staging and target paths stay inside --kubelet-dir', () => {
  it('refuses a path outside it, through .., and through a symbolic link, touching nothing', async () => {
    const s = await serve('dir');
    const volumeId = await newVolume(s);
    const outside = outsideWithLink(s);
    const before = s.fixture.tree();
    const cases = [
      path.join(outside, 'staging'),
      `${s.kubelet}/../elsewhere/staging`,
      path.join(s.kubelet, 'link', 'staging'),
      s.kubelet,
    ];
    for (const stagingPath of cases) {
      const answer = await refusal(stage(s, volumeId, stagingPath));
      expect({ stagingPath, code: answer.code }).toEqual({ stagingPath, code: 'INVALID_ARGUMENT' });
      expect(answer.details).toContain(stagingPath);
      expect(answer.details).toContain(s.kubelet);
    }
    const target = path.join(s.kubelet, 'link', 'target');
    const published = await refusal(publish(s, volumeId, path.join(s.kubelet, 'staging'), target));
    expect(published.code).toBe('INVALID_ARGUMENT');
    expect(published.details).toContain(`target_path ${target}`);
    expect(s.fixture.tree()).toEqual(before);
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it('NodeGetVolumeStats and NodeExpandVolume answer NOT_FOUND for a volume_path outside it, touching nothing', async () => {
    const s = await serve('dir');
    const volumeId = await newVolume(s);
    const outside = outsideWithLink(s);
    const before = s.fixture.tree();
    for (const volumePath of [outside, `${s.kubelet}/../elsewhere`, path.join(s.kubelet, 'link')]) {
      const stats = await refusal(
        call((done) =>
          s.clients.node.NodeGetVolumeStats({ volume_id: volumeId, volume_path: volumePath }, withDeadline(), done),
        ),
      );
      expect({ volumePath, code: stats.code }).toEqual({ volumePath, code: 'NOT_FOUND' });
      expect(stats.details).toContain(`outside the kubelet directory ${s.kubelet}`);
      const expanded = await refusal(
        call((done) =>
          s.clients.node.NodeExpandVolume(
            { volume_id: volumeId, volume_path: volumePath, capacity_range: { required_bytes: String(64 * MiB) } },
            withDeadline(),
            done,
          ),
        ),
      );
      expect({ volumePath, code: expanded.code }).toEqual({ volumePath, code: 'NOT_FOUND' });
    }
    expect(s.fixture.tree()).toEqual(before);
  });

  it('stages and publishes below it, the directories not made yet included', async () => {
    const s = await serve('dir');
    const volumeId = await newVolume(s);
    const stagingPath = path.join(s.kubelet, 'plugins', 'staging');
    fs.mkdirSync(path.dirname(stagingPath), { recursive: true });
    const target = path.join(s.kubelet, 'pods', 'p1', 'mount');
    fs.mkdirSync(path.dirname(target), { recursive: true });
    await stage(s, volumeId, stagingPath);
    await publish(s, volumeId, stagingPath, target);
    await unpublish(s, volumeId, target);
    await unstage(s, volumeId, stagingPath);
  });
});

describe('mount options', () => {
  it('refuses an option that is not on the allowed list, naming it, and stages nothing', async () => {
    const s = await serve('loop');
    const volumeId = await newVolume(s);
    const stagingPath = path.join(s.kubelet, 'staging');
    for (const option of ['suid', 'dev', 'errors=panic', 'journal_path=/dev/sda', 'context=system_u:object_r:x']) {
      const answer = await refusal(stage(s, volumeId, stagingPath, mount([option], 'ext4')));
      expect({ option, code: answer.code }).toEqual({ option, code: 'INVALID_ARGUMENT' });
      expect(answer.details).toContain(`"${option}"`);
    }
    expect(fs.existsSync(stagingPath)).toBe(false);
    expect(s.fixture.list('staging')).toEqual([]);
  });

  it('mounts an ext4 volume with allowed options, nodev and nosuid, and its pod mount too', async () => {
    const s = await serve('loop');
    const volumeId = await newVolume(s);
    const stagingPath = path.join(s.kubelet, 'staging');
    const target = path.join(s.kubelet, 'target');
    await stage(s, volumeId, stagingPath, mount(['noatime', 'discard'], 'ext4'));
    await publish(s, volumeId, stagingPath, target, mount(['noatime', 'discard'], 'ext4'));
    for (const at of [stagingPath, target]) {
      expect(await optionsAt(at)).toEqual(expect.arrayContaining(['nodev', 'nosuid', 'noatime']));
    }
    await unpublish(s, volumeId, target);
    await unstage(s, volumeId, stagingPath);
  });

  it('bind-mounts a dir volume nodev and nosuid, read-only too', async () => {
    const s = await serve('dir');
    const volumeId = await newVolume(s);
    const stagingPath = path.join(s.kubelet, 'staging');
    const target = path.join(s.kubelet, 'target');
    await stage(s, volumeId, stagingPath);
    await publish(s, volumeId, stagingPath, target, mount(), true);
    expect(await optionsAt(stagingPath)).toEqual(expect.arrayContaining(['nodev', 'nosuid']));
    expect(await optionsAt(target)).toEqual(expect.arrayContaining(['ro', 'nodev', 'nosuid']));
    await unpublish(s, volumeId, target);
    await unstage(s, volumeId, stagingPath);
  });

  it("carries a dir volume's per-mount options to its bind mounts and refuses a filesystem's, touching nothing", async () => {
    const s = await serve('dir');
    const volumeId = await newVolume(s);
    const refused = path.join(s.kubelet, 'refused');
    const before = s.fixture.tree();
    const answer = await refusal(stage(s, volumeId, refused, mount(['discard'])));
    expect(answer.code).toBe('INVALID_ARGUMENT');
    expect(answer.details).toMatch(/"discard" applies to a filesystem.*noatime/);
    expect(s.fixture.tree()).toEqual(before);
    const stagingPath = path.join(s.kubelet, 'staging-noatime');
    const target = path.join(s.kubelet, 'target-noatime');
    await stage(s, volumeId, stagingPath, mount(['noatime']));
    await publish(s, volumeId, stagingPath, target, mount(['noatime']), false);
    expect(await optionsAt(stagingPath)).toEqual(expect.arrayContaining(['noatime', 'nodev', 'nosuid']));
    expect(await optionsAt(target)).toEqual(expect.arrayContaining(['noatime', 'nodev', 'nosuid']));
    await unpublish(s, volumeId, target);
    await unstage(s, volumeId, stagingPath);
  });
});

describe('read-only raw block', () => {
  it('publishes a read-only loop device: the reader sees the data and the kernel refuses its writes', async () => {
    const s = await serve('loop');
    const volumeId = await newVolume(s, 'block');
    const stagingPath = path.join(s.kubelet, 'staging-block');
    await stage(s, volumeId, stagingPath, BLOCK);
    const writer = path.join(s.kubelet, 'block-writer');
    await publish(s, volumeId, stagingPath, writer, BLOCK, false);
    const fd = fs.openSync(writer, 'r+');
    fs.writeSync(fd, Buffer.from('written before'), 0, undefined, 0);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    const readers = [
      [BLOCK, true],
      [{ block: {}, access_mode: { mode: 'SINGLE_NODE_READER_ONLY' } }, false],
    ] as const;
    for (const [index, [capability, readonly]] of readers.entries()) {
      const target = path.join(s.kubelet, `block-reader-${index}`);
      await publish(s, volumeId, stagingPath, target, capability, readonly);
      const read = Buffer.alloc(14);
      const rfd = fs.openSync(target, 'r');
      fs.readSync(rfd, read, 0, 14, 0);
      fs.closeSync(rfd);
      expect(read.toString()).toBe('written before');
      expect(writeError(target)).toMatch(/EROFS|EACCES|EPERM/);
      expect((await readMounts()).find((m) => m.mountPoint === target)?.readonly).toBe(true);
    }
    const image = loopImageOf(s, volumeId);
    expect(attached(image)).toHaveLength(2); // the writer's device and one read-only device for both readers
    for (const index of readers.keys()) await unpublish(s, volumeId, path.join(s.kubelet, `block-reader-${index}`));
    expect(attached(image)).toHaveLength(1);
    await unpublish(s, volumeId, writer);
    await unstage(s, volumeId, stagingPath);
    expect(attached(image)).toHaveLength(0);
  });
});

/** Why a write through the device node failed (the open or the write itself); 'written' if it did not. */
function writeError(device: string): string {
  let fd: number | undefined;
  try {
    fd = fs.openSync(device, 'r+');
    fs.writeSync(fd, Buffer.from('written by a reader'), 0, undefined, 0);
    fs.fsyncSync(fd);
    return 'written';
  } catch (error) {
    return String(error);
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

function attached(image: string): string[] {
  return execFileSync('losetup', ['--noheadings', '--output', 'NAME', '--associated', image], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.trim().startsWith('/dev/'));
}

/** The volume's image in the pool (the handle's last part is its key). */
function loopImageOf(s: Served, volumeId: string): string {
  return path.join(s.fixture.pool, 'volumes', volumeId.split('_').pop() ?? volumeId, 'disk.img');
}
