/**
 * The node's health RPCs over real gRPC, with a real dir pool: what the agent's pool state (agent/agent-pool.ts)
 * makes of them. A pool the gate refuses is every own volume's INACCESSIBLE and the storage's UNREACHABLE, with the
 * gate's words, kept within the 1024 characters a CSINode message may hold; a pool not open yet for another reason is
 * UNAVAILABLE (no guess); another node's volume stays NOT_FOUND.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createLogger } from '../../../common/logger';
import { DriverError, FailureType } from '../../../common/failures';
import { formatVolumeId, poolIdPrefix } from '../../../common/names';
import { call, connectCsi, withDeadline, type CsiClients } from '../../../csi/client';
import type { NodeGetStorageHealthResponse__Output } from '../../../csi/generated/csi/v1/NodeGetStorageHealthResponse';
import type { NodeGetVolumeHealthResponse__Output } from '../../../csi/generated/csi/v1/NodeGetVolumeHealthResponse';
import { createIdentityService } from '../../../csi/identity-service';
import { createNodeService } from '../../../csi/node-service';
import { serveCsi, type RunningServer } from '../../../csi/server';
import { codeOf } from '../../support/csi-requests';
import { GI, PoolFixture, randomKey } from '../storage/pool-fixture';

const NODE = 'node-1';
let fixture: PoolFixture;
let server: RunningServer;
let clients: CsiClients;
let poolId: string;
const state: { refusal?: string; open: boolean } = { open: true };

beforeAll(async () => {
  fixture = new PoolFixture();
  const backend = fixture.backend(10 * GI);
  ({ poolId } = await backend.open());
  const kubelet = path.join(fixture.root, 'kubelet');
  fs.mkdirSync(kubelet);
  const endpoint = `unix://${path.join(fixture.root, 'node.sock')}`;
  const node = createNodeService({
    nodeId: NODE,
    poolId: () => {
      if (!state.open) throw new DriverError(FailureType.Unavailable, state.refusal ?? 'the pool is not open yet');
      return poolId;
    },
    poolRefusal: () => (state.open ? undefined : state.refusal),
    backend,
    kubeletDir: kubelet,
  });
  const identity = createIdentityService({ driverName: 'test.durable-csi.io', version: '0', ready: async () => true });
  server = await serveCsi(endpoint, { identity, node }, createLogger('test', 'silent'));
  clients = connectCsi(endpoint);
});
afterAll(async () => {
  clients.close();
  await server.close();
  await fixture.cleanup();
});

const volumeHealth = (volumeId: string) =>
  call<NodeGetVolumeHealthResponse__Output>((done) =>
    clients.node.NodeGetVolumeHealth({ volume_id: volumeId }, withDeadline(), done),
  ).then((answer) => answer.volume_health?.health_statuses);
const storageHealth = () =>
  call<NodeGetStorageHealthResponse__Output>((done) =>
    clients.node.NodeGetStorageHealth({}, withDeadline(), done),
  ).then((answer) => answer.backend_health);

it('says the gate refused the pool, in its words and within 1024 characters, and nothing once it is open', async () => {
  const own = formatVolumeId({ nodeId: NODE, poolIdPrefix: poolIdPrefix(poolId), key: randomKey() });
  const other = formatVolumeId({ nodeId: 'node-2', poolIdPrefix: poolIdPrefix(poolId), key: randomKey() });
  state.open = false;
  state.refusal = `pool /var/lib/durable-csi/pool has no pool identity; mount it there. ${'x'.repeat(2000)}`;
  const [volume] = (await volumeHealth(own))!;
  expect(volume).toEqual({ status: 'INACCESSIBLE', reason: 'PoolRefused', message: expect.any(String) });
  expect(volume!.message).toMatch(/^node node-1: pool \/var\/lib\/durable-csi\/pool has no pool identity; mount/);
  expect(volume!.message).toHaveLength(1024);
  expect(await storageHealth()).toEqual([
    { status: 'STORAGE_UNREACHABLE', reason: 'PoolRefused', message: volume!.message, volume_capability: null },
  ]);
  expect(await codeOf(volumeHealth(other))).toBe('NOT_FOUND');

  // Not open, yet nothing refused (Temporal not reached): no guess.
  state.refusal = undefined;
  expect(await codeOf(storageHealth())).toBe('UNAVAILABLE');
  expect(await codeOf(volumeHealth(own))).toBe('UNAVAILABLE');

  state.open = true;
  expect(await storageHealth()).toEqual([]);
  expect(await codeOf(volumeHealth(own))).toBe('NOT_FOUND'); // open: the pool answers, it has no such volume
});
