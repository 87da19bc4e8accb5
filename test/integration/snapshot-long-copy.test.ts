import fs from 'node:fs';
import path from 'node:path';
import { SLOW_COPY_MS } from '../../agent/failpoints';
import { parseSnapshotId, parseVolumeId } from '../../common/names';
import { TestCluster } from '../support/cluster';
import type { ManagedProcess } from '../support/cluster';
import { createSnapshot, createSnapshotUntilReady, notReadyYet } from '../support/snapshot-requests';
import { CopyGate, isAlive } from '../support/copy-gate';
import { MiB, codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { releaseMountsUnder } from '../unit/storage/mount-helpers';
import { kubeletPaths, nodeRpcs } from './node-helpers';

/**
 * A copy longer than a CSI call waits: CreateSnapshot answers ABORTED while it runs (no ID the CO could delete
 * before the copy lands, docs/snapshots.md), then the one recorded copy once it is done.
 */
describe('a snapshot whose copy takes longer than a call', () => {
  const cluster = new TestCluster('snaplong');
  afterAll(() => cluster.teardown());

  it('is ABORTED while it copies, then answered ready with the one copy', async () => {
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    await cluster.startNode('node-1', { failpoints: 'snapshot.slow-copy' });
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-1', 64 * MiB, onNode('node-1'))));
    const volumeId = volume.volume!.volume_id;
    const started = Date.now();
    expect(await codeOf(createSnapshot(clients, 'snap-1', volumeId))).toBe('ABORTED'); // the call waits 3 s
    expect(Date.now() - started).toBeLessThan(SLOW_COPY_MS); // answered while the copy still ran
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'records'))).toEqual([]);

    const ready = await createSnapshotUntilReady(clients, 'snap-1', volumeId);
    expect(Number(ready.snapshot!.size_bytes)).toBe(64 * MiB);
    const key = parseSnapshotId(ready.snapshot!.snapshot_id)!.key;
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'records'))).toEqual([`${key}.json`]);
  });
});

/**
 * A copy runs without the pool lock (storage/pool/pool-indexes.ts): kubelet's calls on the node's other volumes
 * go on while it copies, those on its source are refused (ABORTED: kubelet retries) rather than changing it under the
 * copy, and so is a deletion of the source. And each attempt is bounded by a budget derived from the volume's size
 * (--copy-min-time plus the size at --copy-rate): a copy past it is stopped, and the next attempt starts. Copies wait
 * at a gate (test/support/copy-gate.ts): a real cp, as long as the test wants.
 */
describe('a snapshot copy that takes long', () => {
  const cluster = new TestCluster('snapgate');
  const gates: CopyGate[] = [];
  const agents: ManagedProcess[] = [];
  let clients: ReturnType<TestCluster['csi']>;
  beforeAll(async () => {
    clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
  });
  afterAll(async () => {
    for (const gate of gates) {
      gate.open();
      for (const pid of gate.started()) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    }
    // Stopped first: a call a test gave up on may still mount when the agent gets to it.
    for (const agent of agents) await agent.stop();
    releaseMountsUnder(cluster.root);
    await cluster.teardown();
  });

  function gateFor(nodeId: string): CopyGate {
    const gate = new CopyGate(path.join(cluster.root, `gate-${nodeId}`));
    gates.push(gate);
    return gate;
  }

  async function volumeOn(nodeId: string, name: string): Promise<string> {
    const answer = await retryLikeCo(() => createVolume(clients, createRequest(name, 64 * MiB, onNode(nodeId))));
    return answer.volume!.volume_id;
  }

  /** What the call answered within `ms`: 'OK', a gRPC code name, or 'blocked'. */
  function within(ms: number, call: Promise<unknown>): Promise<string> {
    return Promise.race([
      codeOf(call),
      new Promise<string>((resolve) => setTimeout(() => resolve(`blocked for ${ms} ms`), ms)),
    ]);
  }

  it("serves kubelet's stage and publish of other volumes while it copies; its source's are ABORTED", async () => {
    const gate = gateFor('node-1');
    const agent = await cluster.startNode('node-1', { env: gate.env() });
    agents.push(agent);
    const rpcs = nodeRpcs(cluster.csi(agent.endpoint));
    const copied = await volumeOn('node-1', 'pvc-copied');
    const other = await volumeOn('node-1', 'pvc-other');
    expect(await notReadyYet(createSnapshot(clients, 'snap-long', copied, 5_000))).toBe(true);
    await gate.untilStarted(1);

    const paths = kubeletPaths(cluster, other);
    expect(await within(5_000, rpcs.stage(other, paths.staging))).toBe('OK');
    expect(await within(5_000, rpcs.publish(other, paths))).toBe('OK');
    const source = kubeletPaths(cluster, copied);
    expect(await within(5_000, rpcs.stage(copied, source.staging))).toBe('ABORTED');
    // A deletion of the source waits for the copy (its node activity is refused, retryably, until it is done).
    expect(await codeOf(deleteVolume(clients, copied, 5_000))).toBe('ABORTED');
    expect(cluster.volumesOnDisk('node-1')).toContain(parseVolumeId(copied)!.key);

    gate.open();
    const ready = await createSnapshotUntilReady(clients, 'snap-long', copied, 60_000);
    const key = parseSnapshotId(ready.snapshot!.snapshot_id)!.key;
    await retryLikeCo(() => deleteVolume(clients, copied));
    expect(cluster.volumesOnDisk('node-1')).toEqual([parseVolumeId(other)!.key]);
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'data'))).toEqual([key]);
    await rpcs.unpublish(other, paths.target);
    await rpcs.unstage(other, paths.staging);
  });

  it('stops an attempt that runs past its budget and tries again; the copy lands once it can', async () => {
    const gate = gateFor('node-2');
    // 1 s plus 64 MiB at 1 TiB/s: about 1 s, where the default gives a 64 MiB volume a little over 2 minutes.
    const extra = ['--copy-min-time', '1s', '--copy-rate', '1Ti'];
    agents.push(await cluster.startNode('node-2', { env: gate.env(), extra }));
    const volumeId = await volumeOn('node-2', 'pvc-budget');
    const started = Date.now();
    expect(await notReadyYet(createSnapshot(clients, 'snap-budget', volumeId, 5_000))).toBe(true);
    const [first, second] = await gate.untilStarted(2, 20_000);
    // The first attempt's cp was stopped at its budget, and its activity retried (after Temporal's 1 s backoff).
    expect(isAlive(first!)).toBe(false);
    expect(second).not.toBe(first);
    expect(Date.now() - started).toBeLessThan(15_000);
    // Nothing recorded: the stopped attempt was rolled back; the one waiting now copies into the same key.
    expect(fs.readdirSync(path.join(cluster.pool('node-2'), 'snapshots', 'records'))).toEqual([]);

    gate.open();
    const ready = await createSnapshotUntilReady(clients, 'snap-budget', volumeId, 60_000);
    const key = parseSnapshotId(ready.snapshot!.snapshot_id)!.key;
    expect(fs.readdirSync(path.join(cluster.pool('node-2'), 'snapshots', 'data'))).toEqual([key]);
    expect(fs.readdirSync(path.join(cluster.pool('node-2'), 'snapshots', 'journal'))).toEqual([]);
  });
});
