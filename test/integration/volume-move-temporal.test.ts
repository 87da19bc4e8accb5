import { Client, Connection } from '@temporalio/client';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PhaseKey, moveWorkflowId, parseVolumeId } from '../../common/names';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster } from '../support/cluster';
import { MiB, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { runCli } from '../support/run-cli';
import { startRunTemporal, type RunTemporal } from '../support/run-temporal';
import { testTemporalFlags, useOwnTemporal } from '../support/test-temporal';
import { BLOCK_CAPABILITY } from './node-helpers';

/**
 * A move with the Temporal server itself SIGKILLed in its phases (issue 39 item 4, docs/volume-moves.md "Crash at
 * each step"): the suite runs its own dev server (its own port and database file) and, as the move goes, kills it
 * once in each phase it finds the move in and starts it again on the same database and port (RunTemporal.restart). The agents and the
 * controller reconnect on their own; the move resumes from its history and ends as one that was never interrupted:
 * the copy's sha256 the source's, the move's snapshot deleted, nothing offered or staged, the source let go. The
 * source's snapshot copy is slowed (snapshot.slow-copy) so that a phase is long enough to be found in; the others
 * are found as they come (each kill is in a phase the workflow showed at that moment).
 */
jest.setTimeout(300_000);

const PHASES = ['holding', 'snapshotting', 'offering', 'pulling', 'adopting', 'releasing'];
const SIZE = 128 * MiB;
const DATA = 96 * MiB;

let workDir: string;
let temporal: RunTemporal | undefined;
let restoreTemporal: (() => void) | undefined;
let cluster: TestCluster;

beforeAll(async () => {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-move-temporal-'));
  temporal = await startRunTemporal('dev', workDir, () => undefined);
  // Every process of this suite (and TestCluster's own client) talks to this server, not jest's.
  restoreTemporal = useOwnTemporal(temporal.config.address);
  cluster = new TestCluster('move-temporal');
});

afterAll(async () => {
  await cluster?.teardown();
  await temporal?.stop();
  restoreTemporal?.();
  if (workDir && !process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(workDir, { recursive: true, force: true });
});

const sha256 = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');
const entries = (nodeId: string, dir: string) => {
  const full = path.join(cluster.pool(nodeId), dir);
  return fs.existsSync(full) ? fs.readdirSync(full).sort() : [];
};
const image = (volumeId: string) => {
  const parts = parseVolumeId(volumeId)!;
  return path.join(cluster.pool(parts.nodeId), 'volumes', parts.key, 'disk.img');
};

it('completes a move whose Temporal server was killed in each phase it was found in: the copy whole, nothing left', async () => {
  const startAgent = async (nodeId: string, failpoints?: string) => {
    const extra = ['--transfer-port', String(await findFreePort()), '--transfer-address', '127.0.0.1'];
    return cluster.startNode(nodeId, { backend: 'loop', capacity: '1Gi', extra, failpoints });
  };
  await startAgent('node-a', 'snapshot.slow-copy');
  await startAgent('node-b');
  const controller = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
  const request = createRequest('pvc-temporal-kills', SIZE, {
    ...onNode('node-a'),
    volume_capabilities: [BLOCK_CAPABILITY],
  });
  const volumeId = (await retryLikeCo(() => createVolume(controller, request))).volume!.volume_id;
  const file = fs.openSync(image(volumeId), 'r+');
  fs.writeSync(file, randomBytes(DATA), 0, DATA, 0);
  fs.fsyncSync(file);
  fs.closeSync(file);
  const before = sha256(image(volumeId));
  const snapshotsBefore = entries('node-a', 'snapshots/data');

  const cli = (...args: string[]) =>
    runCli([...args, '--driver-name', cluster.driverName, ...testTemporalFlags()], { timeoutMs: 240_000 });
  // The first request may fail while the server is down: the second one, after the last kill, attaches.
  const first = cli('volumes', 'move', volumeId, '--to', 'node-b');
  const connection = await Connection.connect({ address: temporal!.config.address });
  const client = new Client({ connection, namespace: 'default' });
  const handle = client.workflow.getHandle(moveWorkflowId(cluster.driverName, volumeId));
  const killedIn: string[] = [];
  const missed: string[] = [];
  try {
    let next = 0;
    while (next < PHASES.length) {
      const description = await handle.describe().catch(() => undefined);
      if (description && description.status.name !== 'RUNNING') break;
      const phase = description?.typedSearchAttributes.get(PhaseKey);
      const at = phase === undefined ? -1 : PHASES.indexOf(phase);
      if (at > next) missed.push(...PHASES.slice(next, at));
      if (at >= next) {
        await temporal!.restart('SIGKILL', 0);
        killedIn.push(PHASES[at]!);
        next = at + 1;
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  } finally {
    await connection.close();
  }
  console.log(`Temporal killed in: ${killedIn.join(', ')}; phases passed between two looks: ${missed.join(', ')}`);
  // The slowed snapshot is always found; the kill in it and two others at least.
  expect(killedIn).toContain('snapshotting');
  expect(killedIn.length).toBeGreaterThanOrEqual(3);

  await first;
  const answer = await cli('volumes', 'move', volumeId, '--to', 'node-b', '--output', 'json');
  expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
  const result = JSON.parse(answer.stdout) as { outcome: string; newVolumeId: string };
  expect(result.outcome).toBe('copied');
  expect(parseVolumeId(result.newVolumeId)?.nodeId).toBe('node-b');
  expect(sha256(image(result.newVolumeId))).toBe(before);
  expect(sha256(image(volumeId))).toBe(before); // the source kept, as the CO's (no Kubernetes here)
  expect(entries('node-a', 'snapshots/data')).toEqual(snapshotsBefore);
  expect(entries('node-a', 'transfers/out')).toEqual([]);
  expect(entries('node-b', 'transfers/in')).toEqual([]);
  const record = path.join(cluster.pool('node-a'), 'records', `${parseVolumeId(volumeId)!.key}.json`);
  expect(JSON.parse(fs.readFileSync(record, 'utf8'))).not.toHaveProperty('moving');
});
