import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnCli, stopChild } from '../../agent/spawn-cli';
import { parseDuration } from '../../common/duration';
import { parseVolumeId } from '../../common/names';
import type { CsiClients } from '../../csi/client';
import { startDevServer, type DevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster, probe, type ManagedProcess } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { testTemporalFlags, useOwnTemporal } from '../support/test-temporal';
import { isMountPoint, releaseMountsUnder } from '../unit/storage/mount-helpers';
import { kubeletPaths, nodeRpcs } from './node-helpers';
import { eventually } from '../support/eventually';

/**
 * A long outage of the Temporal server (issue 33, item 12): 10 minutes, or DURABLE_CSI_TEMPORAL_OUTAGE (a duration,
 * e.g. 90s) for a quicker look. The suite runs its own dev server (its own port and database file), kills it with
 * volumes in place and starts it again on the same database and port, as test/support/run-temporal.ts restart()
 * does (here by hand, so that a failure during the outage ends the suite at once). Meanwhile:
 * - the node agents serve kubelet (stage, publish, stats, unpublish, unstage on volumes that exist), through real
 *   gRPC on their unix sockets;
 * - CreateVolume and DeleteVolume answer UNAVAILABLE or ABORTED, never OK, and nothing changes in the pools;
 * - a controller started during the outage comes up (stays running, Probe and /readyz say not ready, /healthz
 *   live so a Deployment's liveness probe does not restart it) and says why in its log;
 * afterwards the same creates and deletes, retried, complete (one volume per name, the deleted ones gone from disk),
 * and the late controller serves as soon as Temporal is back. The wait is idle: one round of calls every 5 s.
 */
const OUTAGE_MS = parseDuration(process.env.DURABLE_CSI_TEMPORAL_OUTAGE ?? '10m');
const ROUND_MS = 5000;
jest.setTimeout(OUTAGE_MS + 5 * 60_000);

const RETRIABLE = ['UNAVAILABLE', 'ABORTED'];
const log = (message: string) => process.stderr.write(`[temporal-outage] ${message}\n`);

let server: DevServer | undefined;
let workDir: string;
let startServer: () => Promise<DevServer>;
let cluster: TestCluster;
let controller: CsiClients;
let late: { child: ChildProcess; endpoint: string; metrics: string; health: string; clients?: CsiClients };
let restoreTemporal: (() => void) | undefined;
/** name -> volume ID of the volumes made before the outage. */
const volumes = new Map<string, string>();
const nodes = new Map<string, ManagedProcess>();

beforeAll(async () => {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-outage-'));
  const port = await findFreePort();
  startServer = () => startDevServer({ dataDir: path.join(workDir, 'temporal'), port, headless: true });
  server = await startServer();
  // Every process of this suite (and TestCluster's own client) talks to this server, not jest's.
  restoreTemporal = useOwnTemporal(server.address);
  cluster = new TestCluster('outage');
  controller = cluster.csi((await cluster.startController('controller-1')).endpoint);
  for (const nodeId of ['node-1', 'node-2']) nodes.set(nodeId, await cluster.startNode(nodeId));
  const made = await Promise.all(
    ['keep-1', 'keep-2', 'gone-1', 'gone-2'].map(async (name) => {
      const node = `node-${name.slice(-1)}`;
      const answer = await retryLikeCo(() => createVolume(controller, createRequest(name, 32 * MiB, onNode(node))));
      return [name, answer.volume!.volume_id] as const;
    }),
  );
  for (const [name, volumeId] of made) volumes.set(name, volumeId);
});

afterAll(async () => {
  if (cluster) releaseMountsUnder(cluster.root);
  late?.clients?.close();
  if (late) await stopChild(late.child);
  await cluster?.teardown();
  await server?.stop();
  restoreTemporal?.();
  if (workDir && !process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(workDir, { recursive: true, force: true });
});

async function httpStatus(address: string, route: string): Promise<number | string> {
  try {
    return (await fetch(`http://${address}${route}`, { signal: AbortSignal.timeout(3000) })).status;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** Keys of the volumes on a node's disk, by the name their records hold. */
function namesOnDisk(nodeId: string): Map<string, string[]> {
  const records = path.join(cluster.pool(nodeId), 'records');
  const names = new Map<string, string[]>();
  for (const file of fs.existsSync(records) ? fs.readdirSync(records) : []) {
    if (!file.endsWith('.json')) continue;
    const { name } = JSON.parse(fs.readFileSync(path.join(records, file), 'utf8')) as { name: string };
    names.set(name, [...(names.get(name) ?? []), file.slice(0, -'.json'.length)]);
  }
  return names;
}

function onDisk(volumeId: string): boolean {
  const parts = parseVolumeId(volumeId)!;
  return cluster.volumesOnDisk(parts.nodeId).includes(parts.key);
}

/** Starts a controller the way TestCluster does, without waiting for it to turn ready. */
async function startLateController() {
  const endpoint = `unix://${path.join(cluster.root, 'controller-late.sock')}`;
  const metrics = `127.0.0.1:${await findFreePort()}`;
  const health = `127.0.0.1:${await findFreePort()}`;
  const args = ['controller', '--endpoint', endpoint, '--driver-name', cluster.driverName, '--call-wait', '3s'];
  args.push(...testTemporalFlags(), '--metrics-address', metrics, '--health-address', health);
  const child = spawnCli(args, cluster.log('controller-late'), { ...process.env, LOG_LEVEL: 'info' });
  return { child, endpoint, metrics, health };
}

/** One kubelet cycle on a volume: stage, publish, write, stats, unpublish, unstage; the data lands in the pool. */
async function kubeletCycle(nodeClients: CsiClients, volumeId: string, round: number): Promise<void> {
  const rpcs = nodeRpcs(nodeClients);
  const paths = kubeletPaths(cluster, volumeId, `pod-${round}`);
  await rpcs.stage(volumeId, paths.staging);
  await rpcs.publish(volumeId, paths);
  expect(isMountPoint(paths.target)).toBe(true);
  fs.writeFileSync(path.join(paths.target, 'round'), String(round));
  const stats = await rpcs.stats(volumeId, paths.target);
  expect(stats.usage.length).toBeGreaterThan(0);
  await rpcs.unpublish(volumeId, paths.target);
  expect(isMountPoint(paths.target)).toBe(false);
  await rpcs.unstage(volumeId, paths.staging);
  const parts = parseVolumeId(volumeId)!;
  expect(fs.readFileSync(path.join(cluster.pool(parts.nodeId), 'volumes', parts.key, 'round'), 'utf8')).toBe(
    String(round),
  );
}

it(`keeps kubelet served, answers retriably and acknowledges nothing through a ${OUTAGE_MS / 1000} s outage`, async () => {
  const nodeClients = new Map([...nodes].map(([nodeId, node]) => [nodeId, cluster.csi(node.endpoint)]));
  const before = { 'node-1': namesOnDisk('node-1'), 'node-2': namesOnDisk('node-2') };
  const down = server!;
  process.kill(down.pid, 'SIGKILL');
  await down.stop();
  server = undefined;
  const downAt = Date.now();
  log(`Temporal is down for ${OUTAGE_MS / 1000} s`);

  late = await startLateController();
  late.clients = cluster.csi(late.endpoint);
  const codes: Record<string, number> = {};
  const count = (what: string, code: string) => (codes[`${what} ${code}`] = (codes[`${what} ${code}`] ?? 0) + 1);
  let round = 0;
  let slowest = 0;
  while (Date.now() - downAt < OUTAGE_MS - ROUND_MS) {
    const roundStart = Date.now();
    round++;
    const processes: [string, ChildProcess][] = [['controller-late', late.child]];
    for (const [nodeId, node] of nodes) processes.push([nodeId, node.child]);
    for (const [name, child] of processes) {
      if (child.exitCode === null && child.signalCode === null) continue;
      const tail = fs.readFileSync(cluster.log(name), 'utf8').slice(-3000);
      throw new Error(`${name} exited during the outage (${child.exitCode ?? child.signalCode}):\n${tail}`);
    }
    const targets = [controller, ...(round > 2 ? [late.clients] : [])];
    const via = targets[round % targets.length] as CsiClients;
    const [createCode, deleteCode] = await Promise.all([
      codeOf(createVolume(via, createRequest(`new-${(round % 2) + 1}`, 32 * MiB, onNode(`node-${(round % 2) + 1}`)))),
      codeOf(deleteVolume(via, volumes.get(`gone-${(round % 2) + 1}`)!)),
    ]);
    count('CreateVolume', createCode);
    count('DeleteVolume', deleteCode);
    expect(RETRIABLE).toContain(createCode);
    expect(RETRIABLE).toContain(deleteCode);

    const nodeId = `node-${(round % 2) + 1}`;
    await kubeletCycle(nodeClients.get(nodeId)!, volumes.get(`keep-${(round % 2) + 1}`)!, round);
    // Nothing changed in the pools: the deletions did not happen, the creates made nothing.
    for (const id of ['node-1', 'node-2'] as const) expect(namesOnDisk(id)).toEqual(before[id]);

    if (round > 2) {
      expect(await probe(late.clients)).toBe(false);
      expect(await httpStatus(late.metrics, '/readyz')).toBe(503);
      // Liveness: a Deployment must not restart it for an outage it cannot fix.
      expect(await httpStatus(late.health, '/healthz')).toBe(200);
    }
    slowest = Math.max(slowest, Date.now() - roundStart);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, ROUND_MS - (Date.now() - roundStart))));
  }
  log(`${round} rounds during the outage (the slowest took ${slowest} ms): ${JSON.stringify(codes)}`);
  expect(fs.readFileSync(cluster.log('controller-late'), 'utf8')).toMatch(
    /cannot connect to Temporal at .*retrying in/,
  );
  expect(late.child.exitCode).toBeNull();
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, downAt + OUTAGE_MS - Date.now())));
  server = await startServer();
  log(`Temporal is back after ${Math.round((Date.now() - downAt) / 1000)} s`);
});

it('settles once Temporal is back: the late controller serves, the retried creates and deletes complete', async () => {
  if (!server) throw new Error('the outage test failed: Temporal was not started again');
  const backAt = Date.now();
  const clients = late.clients!;
  await retryLikeCo(async () => {
    if (!(await probe(clients))) throw Object.assign(new Error('not ready'), { code: 14 });
  }, 60_000);
  const readyAfterMs = Date.now() - backAt;
  log(`the late controller turned ready ${readyAfterMs} ms after Temporal was back`);
  expect(readyAfterMs).toBeLessThan(15_000);
  // /readyz reuses its answer for up to 3 s (READINESS_TTL_MS in agent/controller.ts): it may still say 503 from
  // just before Temporal was back (seen once on a loaded machine), and must turn 200 within that and one ask.
  await eventually('/readyz 200', async () => (await httpStatus(late.metrics, '/readyz')) === 200, 10_000);
  // The node agents stayed up and ready; the creates below, one aimed at each, show their queues are served.
  for (const node of nodes.values()) expect(await probe(cluster.csi(node.endpoint))).toBe(true);

  const created = await Promise.all(
    [1, 2].map((n) =>
      retryLikeCo(() => createVolume(clients, createRequest(`new-${n}`, 32 * MiB, onNode(`node-${n}`)))),
    ),
  );
  await Promise.all([1, 2].map((n) => retryLikeCo(() => deleteVolume(clients, volumes.get(`gone-${n}`)!))));
  // The same creates through the first controller: the same volumes.
  for (const [index, answer] of created.entries()) {
    const again = await retryLikeCo(() =>
      createVolume(controller, createRequest(`new-${index + 1}`, 32 * MiB, onNode(`node-${index + 1}`))),
    );
    expect(again.volume!.volume_id).toBe(answer.volume!.volume_id);
    expect(parseVolumeId(answer.volume!.volume_id)!.nodeId).toBe(`node-${index + 1}`);
    expect(onDisk(answer.volume!.volume_id)).toBe(true);
  }
  for (const n of [1, 2]) {
    expect(onDisk(volumes.get(`gone-${n}`)!)).toBe(false);
    expect(onDisk(volumes.get(`keep-${n}`)!)).toBe(true);
    const names = namesOnDisk(`node-${n}`);
    // Exactly one volume per name, on the node asked for; the deleted ones gone.
    expect([...names.keys()].sort()).toEqual([`keep-${n}`, `new-${n}`]);
    expect([...names.values()].every((keys) => keys.length === 1)).toBe(true);
  }
  expect(late.child.exitCode).toBeNull();
});
