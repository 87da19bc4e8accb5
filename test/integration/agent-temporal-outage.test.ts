import fs from 'node:fs';
import path from 'node:path';
import { call, withDeadline, type CsiClients } from '../../csi/client';
import type { NodeGetInfoResponse__Output } from '../../csi/generated/csi/v1/NodeGetInfoResponse';
import { parseVolumeId } from '../../common/names';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster, probe, temporalAddress, type ManagedProcess } from '../support/cluster';
import { MiB, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { TcpForwarder } from '../support/tcp-forwarder';
import { isMountPoint, releaseMountsUnder } from '../unit/storage/mount-helpers';
import { kubeletPaths, nodeRpcs } from './node-helpers';
import { eventually } from '../support/eventually';

/**
 * A node agent that starts while Temporal is unreachable (a reboot during an outage) serves kubelet at once:
 * staging, publishing and their undoing need no Temporal. It connects in the background, and CSI Probe (readiness)
 * says not ready until it has. Temporal is "unreachable" through a port nothing listens on, then "back" when a
 * forwarder to the test server starts listening there.
 */
jest.setTimeout(240_000);

const cluster = new TestCluster('outage');
let controller: CsiClients;
const forwarders: TcpForwarder[] = [];

beforeAll(async () => {
  controller = cluster.csi((await cluster.startController()).endpoint);
});
afterAll(async () => {
  releaseMountsUnder(cluster.root);
  await Promise.all(forwarders.map((forwarder) => forwarder.close()));
  await cluster.teardown();
});

/** Starts the agent against a port nothing listens on; resolves once its CSI socket answers. */
async function startCutOff(
  nodeId: string,
): Promise<{ agent: ManagedProcess; clients: CsiClients; port: number; http: (path: string) => Promise<number> }> {
  const port = await findFreePort();
  const metrics = `127.0.0.1:${await findFreePort()}`;
  const agent = await cluster.startNode(nodeId, {
    temporalAddress: `127.0.0.1:${port}`,
    waitReady: false,
    extra: ['--metrics-address', metrics],
  });
  const http = async (route: string) => (await fetch(`http://${metrics}${route}`)).status;
  const clients = cluster.csi(agent.endpoint);
  const exited = agent.exited.then(() => {
    throw new Error(`${nodeId} exited: ${fs.readFileSync(cluster.log(nodeId), 'utf8').slice(-2000)}`);
  });
  exited.catch(() => undefined);
  await Promise.race([eventually(`${nodeId} serves CSI`, async () => (await probe(clients)) !== undefined), exited]);
  return { agent, clients, port, http };
}

it('serves stage, publish and their undoing while Temporal is unreachable, and turns ready once it connects', async () => {
  const first = await cluster.startNode('node-1');
  const answer = await retryLikeCo(() =>
    createVolume(controller, createRequest('pvc-outage', 64 * MiB, onNode('node-1'))),
  );
  const volumeId = answer.volume!.volume_id;
  // A reboot during a Temporal outage.
  await first.kill('SIGKILL');
  const { agent, clients, port, http } = await startCutOff('node-1');
  expect(await probe(clients)).toBe(false);
  // Liveness (what the DaemonSet probes) holds; readiness does not.
  expect(await http('/livez')).toBe(200);
  expect(await http('/readyz')).toBe(503);

  const rpcs = nodeRpcs(clients);
  const info = await call<NodeGetInfoResponse__Output>((done) => clients.node.NodeGetInfo({}, withDeadline(), done));
  expect(info.node_id).toBe('node-1');
  const paths = kubeletPaths(cluster, volumeId);
  await rpcs.stage(volumeId, paths.staging);
  await rpcs.publish(volumeId, paths);
  expect(isMountPoint(paths.target)).toBe(true);
  fs.writeFileSync(path.join(paths.target, 'data'), 'written while Temporal was away');
  const stats = await rpcs.stats(volumeId, paths.target);
  expect(stats.usage.length).toBeGreaterThan(0);
  await rpcs.unpublish(volumeId, paths.target);
  expect(isMountPoint(paths.target)).toBe(false);
  await rpcs.unstage(volumeId, paths.staging);
  const key = parseVolumeId(volumeId)!.key;
  expect(fs.readFileSync(path.join(cluster.pool('node-1'), 'volumes', key, 'data'), 'utf8')).toBe(
    'written while Temporal was away',
  );
  // Still alive, still not ready, and saying why.
  expect(agent.child.exitCode).toBeNull();
  expect(await probe(clients)).toBe(false);
  expect(fs.readFileSync(cluster.log('node-1'), 'utf8')).toMatch(
    /cannot connect to Temporal at 127\.0\.0\.1:\d+.*retrying in/,
  );

  forwarders.push(await TcpForwarder.start(port, temporalAddress()));
  await eventually('ready once Temporal answers', async () => (await probe(clients)) === true, 90_000);
  expect(await http('/readyz')).toBe(200);
  // The worker runs: an activity on this node's queue creates a volume in its pool, and deletes it.
  const next = await retryLikeCo(() =>
    createVolume(controller, createRequest('pvc-after', 64 * MiB, onNode('node-1'))),
  );
  expect(cluster.volumesOnDisk('node-1')).toContain(parseVolumeId(next.volume!.volume_id)!.key);
  await retryLikeCo(() => deleteVolume(controller, next.volume!.volume_id));
  expect(cluster.volumesOnDisk('node-1')).not.toContain(parseVolumeId(next.volume!.volume_id)!.key);
  expect(agent.child.exitCode).toBeNull();
});

it('does not give an empty pool directory an identity before it can read its record', async () => {
  const { clients, port } = await startCutOff('node-2');
  await new Promise((resolve) => setTimeout(resolve, 3000));
  expect(fs.existsSync(path.join(cluster.pool('node-2'), 'pool.json'))).toBe(false);
  expect(await probe(clients)).toBe(false);

  // A node no record remembers: once it can check, the first pool identity is made.
  forwarders.push(await TcpForwarder.start(port, temporalAddress()));
  await eventually('ready once Temporal answers', async () => (await probe(clients)) === true, 90_000);
  expect(fs.existsSync(path.join(cluster.pool('node-2'), 'pool.json'))).toBe(true);
});
