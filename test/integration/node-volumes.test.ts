import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { status, type ServiceError } from '@grpc/grpc-js';
import type { CsiClients } from '../../csi/client';
import type { VolumeCapability } from '../../csi/generated/csi/v1/VolumeCapability';
import { formatVolumeId, parseVolumeId } from '../../common/names';
import type { ManagedProcess } from '../support/cluster';
import { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { blockdevSize, isMountPoint, loopDevicesOf, releaseMountsUnder } from '../unit/storage/mount-helpers';
import { BLOCK_CAPABILITY, kubeletPaths, nodeRpcs } from './node-helpers';
import type { Backend } from './node-helpers';

/**
 * Stage, publish and delete through the real stack (controller and node agent processes, Temporal, real mounts
 * and loop devices) for both backends: data survives every step back and forth and agent restarts, and a
 * volume that is still staged cannot be deleted.
 */
describe.each<Backend>(['dir', 'loop'])('the node side of the %s backend', (backend) => {
  const cluster = new TestCluster(`node-${backend}`);
  let controller: CsiClients;
  let agent: ManagedProcess;
  let rpcs: ReturnType<typeof nodeRpcs>;

  beforeAll(async () => {
    agent = await cluster.startNode('node-1', { backend, capacity: '2Gi' });
    rpcs = nodeRpcs(cluster.csi(agent.endpoint));
    controller = cluster.csi((await cluster.startController()).endpoint);
  });
  afterAll(async () => {
    releaseMountsUnder(cluster.root);
    await cluster.teardown();
  });

  async function restartAgent(): Promise<void> {
    await agent.kill('SIGKILL');
    agent = await cluster.startNode('node-1', { backend, capacity: '2Gi' });
    rpcs = nodeRpcs(cluster.csi(agent.endpoint));
  }

  async function newVolume(name: string, capability?: VolumeCapability): Promise<string> {
    const extra = { ...onNode('node-1'), ...(capability ? { volume_capabilities: [capability] } : {}) };
    const answer = await retryLikeCo(() => createVolume(controller, createRequest(name, 64 * MiB, extra)));
    return answer.volume!.volume_id;
  }

  function image(volumeId: string): string {
    return path.join(cluster.pool('node-1'), 'volumes', parseVolumeId(volumeId)!.key, 'disk.img');
  }

  it('advertises staging, stats, volume condition, volume and storage health, and expansion', async () => {
    const types = (await rpcs.capabilities()).capabilities.map((capability) => capability.rpc?.type).sort();
    expect(types).toEqual([
      'EXPAND_VOLUME',
      'GET_STORAGE_HEALTH',
      'GET_VOLUME_HEALTH',
      'GET_VOLUME_STATS',
      'STAGE_UNSTAGE_VOLUME',
      'VOLUME_CONDITION',
    ]);
  });

  it('keeps data across unpublish, unstage, agent restarts and a restage', async () => {
    const volumeId = await newVolume('pvc-data');
    const paths = kubeletPaths(cluster, volumeId);
    for (let twice = 0; twice < 2; twice++) await rpcs.stage(volumeId, paths.staging);
    for (let twice = 0; twice < 2; twice++) await rpcs.publish(volumeId, paths);
    fs.writeFileSync(path.join(paths.target, 'data'), 'survives');
    const stats = await rpcs.stats(volumeId, paths.target);
    expect(stats.volume_condition).toEqual({ abnormal: false, message: expect.any(String) });
    expect(stats.usage.map((usage) => usage.unit)).toEqual(['BYTES', 'INODES']);

    for (let twice = 0; twice < 2; twice++) await rpcs.unpublish(volumeId, paths.target);
    expect(fs.existsSync(paths.target)).toBe(false);
    for (let twice = 0; twice < 2; twice++) await rpcs.unstage(volumeId, paths.staging);
    expect(isMountPoint(paths.staging)).toBe(false);
    if (backend === 'loop') expect(loopDevicesOf(image(volumeId))).toEqual([]);

    await restartAgent();
    await rpcs.stage(volumeId, paths.staging);
    await rpcs.publish(volumeId, paths);
    expect(fs.readFileSync(path.join(paths.target, 'data'), 'utf8')).toBe('survives');

    // Killed while published: the mounts live on in the kernel, and the restarted agent adopts them.
    await restartAgent();
    expect(fs.readFileSync(path.join(paths.target, 'data'), 'utf8')).toBe('survives');
    expect((await rpcs.stats(volumeId, paths.target)).volume_condition?.abnormal).toBe(false);
    await rpcs.publish(volumeId, paths);
    await rpcs.unpublish(volumeId, paths.target);
    await rpcs.unstage(volumeId, paths.staging);

    await retryLikeCo(() => deleteVolume(controller, volumeId));
    expect(cluster.volumesOnDisk('node-1')).not.toContain(parseVolumeId(volumeId)!.key);
    if (backend === 'loop') expect(loopDevicesOf(image(volumeId))).toEqual([]);
  });

  it('refuses to delete a volume that is still staged, losing nothing', async () => {
    const volumeId = await newVolume('pvc-staged');
    const { key } = parseVolumeId(volumeId)!;
    const paths = kubeletPaths(cluster, volumeId, 'pod-2');
    await rpcs.stage(volumeId, paths.staging);
    await rpcs.publish(volumeId, paths);
    fs.writeFileSync(path.join(paths.target, 'data'), 'precious');

    const refused = await retryLikeCo(() => deleteVolume(controller, volumeId)).then(
      () => undefined,
      (error: ServiceError) => error,
    );
    expect(refused && status[refused.code]).toBe('FAILED_PRECONDITION');
    expect(refused?.details).toMatch(new RegExp(`is staged at ${paths.staging}; unstage it first`));
    expect(fs.readFileSync(path.join(paths.target, 'data'), 'utf8')).toBe('precious');
    expect(cluster.volumesOnDisk('node-1')).toContain(key);

    await rpcs.unpublish(volumeId, paths.target);
    await rpcs.unstage(volumeId, paths.staging);
    await retryLikeCo(() => deleteVolume(controller, volumeId));
    expect(cluster.volumesOnDisk('node-1')).not.toContain(key);
  });

  it('answers INVALID_ARGUMENT for bad requests and NOT_FOUND for volumes it does not hold, touching nothing', async () => {
    const volumeId = await newVolume('pvc-bad');
    const parts = parseVolumeId(volumeId)!;
    const paths = kubeletPaths(cluster, volumeId, 'pod-3');
    const multiNode: VolumeCapability = { mount: {}, access_mode: { mode: 'MULTI_NODE_MULTI_WRITER' } };
    const invalid = [
      rpcs.stage('', paths.staging),
      rpcs.stage(volumeId, ''),
      rpcs.stage(volumeId, 'relative/staging'),
      rpcs.stage(volumeId, paths.staging, null),
      rpcs.stage(volumeId, paths.staging, multiNode),
      rpcs.unstage(volumeId, ''),
      rpcs.publish(volumeId, { ...paths, target: '' }),
      rpcs.publish(volumeId, { ...paths, staging: '' }),
      rpcs.unpublish(volumeId, ''),
      rpcs.stats(volumeId, ''),
      rpcs.expand(volumeId, '', 0),
      ...(backend === 'dir' ? [rpcs.stage(volumeId, paths.staging, BLOCK_CAPABILITY)] : []),
    ];
    for (const answer of invalid) expect(await codeOf(answer)).toBe('INVALID_ARGUMENT');

    const strangers = [
      formatVolumeId({ ...parts, nodeId: 'node-9' }),
      formatVolumeId({ ...parts, poolIdPrefix: 'f'.repeat(16) }),
      formatVolumeId({ ...parts, key: 'a'.repeat(32) }),
      'not-a-volume-id',
    ];
    for (const stranger of strangers) {
      expect(await codeOf(rpcs.stage(stranger, paths.staging))).toBe('NOT_FOUND');
      expect(await codeOf(rpcs.unstage(stranger, paths.staging))).toBe('NOT_FOUND');
      expect(await codeOf(rpcs.unpublish(stranger, paths.target))).toBe('NOT_FOUND');
    }
    expect(await codeOf(rpcs.stats(volumeId, paths.staging))).toBe('NOT_FOUND'); // not staged: not its mount
    expect(fs.readdirSync(paths.staging)).toEqual([]);
    expect(isMountPoint(paths.staging)).toBe(false);
    expect(fs.existsSync(paths.target)).toBe(false);
    if (backend === 'loop') expect(loopDevicesOf(image(volumeId))).toEqual([]);
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'staging'))).toEqual([]);
  });

  if (backend === 'loop') {
    it('hands a block volume over as a device of its size', async () => {
      const volumeId = await newVolume('pvc-block', BLOCK_CAPABILITY);
      const paths = kubeletPaths(cluster, volumeId, 'pod-4');
      await rpcs.stage(volumeId, paths.staging, BLOCK_CAPABILITY);
      for (let twice = 0; twice < 2; twice++) await rpcs.publish(volumeId, paths, BLOCK_CAPABILITY);
      expect(fs.statSync(paths.target).isBlockDevice()).toBe(true);
      expect(blockdevSize(paths.target)).toBe(64 * MiB);
      const stats = await rpcs.stats(volumeId, paths.target);
      expect(stats.usage).toEqual([{ unit: 'BYTES', total: String(64 * MiB), used: '0', available: '0' }]);

      await rpcs.unpublish(volumeId, paths.target);
      expect(fs.existsSync(paths.target)).toBe(false);
      await rpcs.unstage(volumeId, paths.staging);
      expect(loopDevicesOf(image(volumeId))).toEqual([]);
      await retryLikeCo(() => deleteVolume(controller, volumeId));
    });

    it('stages and publishes again what a reboot took away', async () => {
      const volumeId = await newVolume('pvc-reboot');
      const paths = kubeletPaths(cluster, volumeId, 'pod-5');
      await rpcs.stage(volumeId, paths.staging);
      await rpcs.publish(volumeId, paths);
      fs.writeFileSync(path.join(paths.target, 'data'), 'after the reboot');

      await agent.kill('SIGKILL');
      // The reboot: the kernel forgets every mount and loop device; the pool and kubelet's directories stay.
      releaseMountsUnder(path.join(cluster.root, 'kubelet'));
      for (const device of loopDevicesOf(image(volumeId))) execFileSync('losetup', ['--detach', device]);
      agent = await cluster.startNode('node-1', { backend, capacity: '2Gi' });
      rpcs = nodeRpcs(cluster.csi(agent.endpoint));

      expect(isMountPoint(paths.staging)).toBe(true);
      await rpcs.stage(volumeId, paths.staging); // what kubelet does after a reboot
      await rpcs.publish(volumeId, paths);
      expect(fs.readFileSync(path.join(paths.target, 'data'), 'utf8')).toBe('after the reboot');
      await rpcs.unpublish(volumeId, paths.target);
      await rpcs.unstage(volumeId, paths.staging);
      await retryLikeCo(() => deleteVolume(controller, volumeId));
    });
  }
});
