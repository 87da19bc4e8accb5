import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { call, withDeadline, type CsiClients } from '../../csi/client';
import type { ControllerGetCapabilitiesResponse__Output } from '../../csi/generated/csi/v1/ControllerGetCapabilitiesResponse';
import type { ControllerGetVolumeHealthResponse__Output } from '../../csi/generated/csi/v1/ControllerGetVolumeHealthResponse';
import type { ControllerListVolumeHealthResponse__Output } from '../../csi/generated/csi/v1/ControllerListVolumeHealthResponse';
import { formatVolumeId, parseVolumeId } from '../../common/names';
import { forgetNode } from '../../operations/forget-node';
import type { ManagedProcess } from '../support/cluster';
import { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';
import { loopDevicesOf, releaseMountsUnder } from '../unit/storage/mount-helpers';
import { kubeletPaths, nodeRpcs } from './node-helpers';

/**
 * Volume health (CSI v1.13) through the real stack: a node agent on a loop pool, a controller, the real Temporal dev
 * server. The node says what it sees (a loop device detached behind its back, until the agent restarts and attaches
 * it again), in NodeGetVolumeHealth and in NodeGetVolumeStats' condition alike; the controller says what the
 * cluster knows (a node offline, a deletion waiting for it, a node forgotten and the deletion written off), never
 * "healthy" for a volume whose node cannot be asked. Bad input gets the spec's codes. The pool's own conditions
 * (read-only, full, disk unmounted) are test/unit/storage/pool-health.test.ts, the gate's refusal
 * test/integration/pool-identity-decision.test.ts.
 */
jest.setTimeout(180_000);

const cluster = new TestCluster('health');
let controller: CsiClients;
let agent: ManagedProcess;
let rpcs: ReturnType<typeof nodeRpcs>;

beforeAll(async () => {
  agent = await cluster.startNode('node-1', { backend: 'loop', capacity: '2Gi' });
  rpcs = nodeRpcs(cluster.csi(agent.endpoint));
  controller = cluster.csi((await cluster.startController()).endpoint);
});
afterAll(async () => {
  releaseMountsUnder(cluster.root);
  await cluster.teardown();
});

const controllerHealth = (volumeId: string) =>
  call<ControllerGetVolumeHealthResponse__Output>((done) =>
    controller.controller.ControllerGetVolumeHealth({ volume_id: volumeId }, withDeadline(30_000), done),
  ).then((answer) => answer.volume_health?.health_statuses ?? []);
const listHealth = (starting_token = '', max_entries = 0) =>
  call<ControllerListVolumeHealthResponse__Output>((done) =>
    controller.controller.ControllerListVolumeHealth({ starting_token, max_entries }, withDeadline(30_000), done),
  );

async function newVolume(name: string, nodeId = 'node-1'): Promise<string> {
  const answer = await retryLikeCo(() => createVolume(controller, createRequest(name, 64 * MiB, onNode(nodeId))));
  return answer.volume!.volume_id;
}

it('advertises the health RPCs on both services', async () => {
  const node = (await rpcs.capabilities()).capabilities.map((capability) => capability.rpc?.type);
  expect(node).toEqual(expect.arrayContaining(['GET_VOLUME_HEALTH', 'GET_STORAGE_HEALTH', 'VOLUME_CONDITION']));
  const answer = await call<ControllerGetCapabilitiesResponse__Output>((done) =>
    controller.controller.ControllerGetCapabilities({}, withDeadline(), done),
  );
  expect(answer.capabilities.map((capability) => capability.rpc?.type)).toEqual(
    expect.arrayContaining(['GET_VOLUME_HEALTH', 'LIST_VOLUME_HEALTH']),
  );
});

it('answers bad input with the precise code, on the node and on the controller', async () => {
  const volumeId = await newVolume('pvc-bad');
  const parts = parseVolumeId(volumeId)!;
  const unknown = formatVolumeId({ ...parts, key: 'f'.repeat(32) });
  const elsewhere = formatVolumeId({ ...parts, nodeId: 'node-2' });
  expect(await codeOf(rpcs.volumeHealth(''))).toBe('INVALID_ARGUMENT');
  expect(await codeOf(rpcs.volumeHealth(volumeId, { staging: 'relative/path' }))).toBe('INVALID_ARGUMENT');
  expect(await codeOf(rpcs.volumeHealth('not-a-volume-id'))).toBe('NOT_FOUND');
  expect(await codeOf(rpcs.volumeHealth(unknown))).toBe('NOT_FOUND');
  await expect(rpcs.volumeHealth(elsewhere)).rejects.toThrow(/lives on node node-2, not on node-1/);
  expect(await rpcs.volumeHealth(volumeId)).toEqual([]);
  expect(await rpcs.storageHealth()).toEqual([]);

  expect(await codeOf(controllerHealth(''))).toBe('INVALID_ARGUMENT');
  expect(await codeOf(controllerHealth('not-a-volume-id'))).toBe('NOT_FOUND');
  // The live node's pool answers: the volume is not there.
  await expect(controllerHealth(unknown)).rejects.toThrow(/does not exist on node node-1/);
  expect(await controllerHealth(volumeId)).toEqual([]);
  expect(await codeOf(listHealth('garbage'))).toBe('ABORTED');
  expect(await codeOf(listHealth('', -1))).toBe('INVALID_ARGUMENT');
  expect((await listHealth()).entries).toEqual([]);
  await retryLikeCo(() => deleteVolume(controller, volumeId));
  await expect(controllerHealth(volumeId)).rejects.toThrow(/was deleted from node node-1/);
});

it('reports a loop device detached behind its back, in health and stats, until the restarted agent attaches it', async () => {
  const volumeId = await newVolume('pvc-detached');
  const paths = kubeletPaths(cluster, volumeId);
  await rpcs.stage(volumeId, paths.staging);
  await rpcs.publish(volumeId, paths);
  const image = path.join(cluster.pool('node-1'), 'volumes', parseVolumeId(volumeId)!.key, 'disk.img');
  execFileSync('umount', [paths.target]);
  execFileSync('umount', [paths.staging]);
  for (const device of loopDevicesOf(image)) execFileSync('losetup', ['--detach', device]);

  const problems = await rpcs.volumeHealth(volumeId, paths);
  expect(problems).toEqual([
    {
      status: 'INACCESSIBLE',
      reason: 'DeviceDetached',
      message: expect.stringMatching(/^node node-1: volume .* has no device attached .*restart the node agent/),
    },
  ]);
  const stats = await rpcs.stats(volumeId, paths.staging);
  expect(stats.volume_condition).toEqual({
    abnormal: true,
    message: problems[0]!.message.replace('node node-1: ', ''),
  });
  // Node-only: the controller knows nothing wrong with a live node's volume.
  expect(await controllerHealth(volumeId)).toEqual([]);

  await agent.kill('SIGKILL');
  agent = await cluster.startNode('node-1', { backend: 'loop', capacity: '2Gi' });
  rpcs = nodeRpcs(cluster.csi(agent.endpoint));
  expect(await rpcs.volumeHealth(volumeId, paths)).toEqual([]);
  expect((await rpcs.stats(volumeId, paths.staging)).volume_condition?.abnormal).toBe(false);
  await rpcs.unstage(volumeId, paths.staging);
});

it('never calls a volume of an offline node healthy: offline, deletion waiting, then forgotten and written off', async () => {
  const node2 = await cluster.startNode('node-2');
  const kept = await newVolume('pvc-kept', 'node-2');
  const deleted = await newVolume('pvc-deleted', 'node-2');
  await node2.stop();
  await cluster.untilOffline('node-2');

  const offline = {
    status: 'INACCESSIBLE',
    reason: 'NodeOffline',
    message: expect.stringMatching(/^node node-2 is offline \(last heard .* ago\).*durable-csi nodes forget node-2/),
  };
  expect(await controllerHealth(kept)).toEqual([offline]);
  expect(await codeOf(deleteVolume(controller, deleted, 3000))).toBe('ABORTED');
  expect(await controllerHealth(deleted)).toEqual([
    offline,
    {
      status: 'INACCESSIBLE',
      reason: 'DeletionWaiting',
      message: expect.stringMatching(/has waited .* for node node-2: its PersistentVolume stays/),
    },
  ]);
  // Listed, one page at a time, through visibility (seconds behind).
  const both = [kept, deleted].sort();
  await eventually('both listed', async () => (await listHealth()).entries.length === 2);
  const first = await listHealth('', 1);
  expect(first.entries.map((entry) => entry.volume_id)).toEqual([both[0]]);
  const second = await listHealth(first.next_token, 1);
  expect(second.entries.map((entry) => entry.volume_id)).toEqual([both[1]]);

  const client = await cluster.temporal();
  await forgetNode(client, cluster.driverName, 'node-2', 'disk died');
  await retryLikeCo(() => deleteVolume(controller, deleted));
  expect(await controllerHealth(kept)).toEqual([
    {
      status: 'DATA_LOSS',
      reason: 'NodeForgotten',
      message: expect.stringMatching(/^node node-2 was forgotten at .* \(disk died; last heard .*Restore the claim/),
    },
  ]);
  expect(await controllerHealth(deleted)).toEqual([
    { status: 'DATA_LOSS', reason: 'WrittenOff', message: expect.stringMatching(/written off/) },
  ]);
});
