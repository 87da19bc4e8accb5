import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseSnapshotId } from '../../common/names';
import { TestCluster } from '../support/cluster';
import { CopyGate, isAlive } from '../support/copy-gate';
import { isFrozen, releaseMountsUnder } from '../unit/storage/mount-helpers';
import { kubeletPaths, nodeRpcs } from './node-helpers';
import { createSnapshot, createSnapshotUntilReady, notReadyYet } from '../support/snapshot-requests';
import { MiB, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';

/**
 * A node agent killed after making the copy, before answering: the snapshot waits for that node (ABORTED), and when
 * the agent returns the retried activity finds the copy by its key. One copy, no orphan.
 */
describe('node agent killed after copying a snapshot, before answering', () => {
  const cluster = new TestCluster('snapkill');
  afterAll(() => cluster.teardown());

  it('completes on the same node when it returns, with the one copy', async () => {
    const first = await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-1', 64 * MiB, onNode('node-1'))));
    const volumeId = volume.volume!.volume_id;
    await first.stop();
    const doomed = await cluster.startNode('node-1', { failpoints: 'snapshot.after-copy' });

    expect(await notReadyYet(createSnapshot(clients, 'snap-1', volumeId, 5_000))).toBe(true);
    await doomed.exited;
    expect(doomed.child.signalCode).toBe('SIGKILL');
    const copies = fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'data'));
    expect(copies).toHaveLength(1);

    await cluster.startNode('node-1');
    const answer = await createSnapshotUntilReady(clients, 'snap-1', volumeId);
    expect(parseSnapshotId(answer.snapshot!.snapshot_id)?.key).toBe(copies[0]);
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'data'))).toEqual(copies);
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'journal'))).toEqual([]);
  });
});

/**
 * A node agent killed while it copies a staged loop volume (a DaemonSet rollout's SIGKILL, the OOM killer): the
 * volume's filesystem was frozen for the copy and nothing thawed it. The agent journals the freeze before it freezes
 * (frozen/ in the pool) and thaws what the journal names when it starts again, so the workload can write and the
 * retried snapshot (whose own freeze would otherwise fail for ever with EBUSY) completes.
 */
describe('node agent killed while a copy holds a staged loop volume frozen', () => {
  const cluster = new TestCluster('snapfreeze');
  const gate = new CopyGate(path.join(cluster.root, 'gate'));
  let staging: string | undefined;
  afterAll(async () => {
    gate.open();
    for (const pid of gate.started()) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    if (staging) spawnSync('fsfreeze', ['--unfreeze', staging]);
    releaseMountsUnder(cluster.root);
    await cluster.teardown();
  });

  it('thaws the filesystem when the agent starts again; the retried snapshot completes', async () => {
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    const doomed = await cluster.startNode('node-1', { backend: 'loop', capacity: '2Gi', env: gate.env() });
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-1', 64 * MiB, onNode('node-1'))));
    const volumeId = volume.volume!.volume_id;
    ({ staging } = kubeletPaths(cluster, volumeId));
    await nodeRpcs(cluster.csi(doomed.endpoint)).stage(volumeId, staging);
    fs.writeFileSync(path.join(staging, 'data'), 'before the snapshot');
    expect(isFrozen(staging)).toBe(false);

    expect(await notReadyYet(createSnapshot(clients, 'snap-1', volumeId, 5_000))).toBe(true);
    const [copy] = await gate.untilStarted(1);
    expect(isFrozen(staging)).toBe(true);
    await doomed.kill('SIGKILL');
    process.kill(copy!, 'SIGKILL'); // a Pod's kill takes every process in it
    expect(isFrozen(staging)).toBe(true);

    gate.open();
    const restarted = await cluster.startNode('node-1', { backend: 'loop', capacity: '2Gi' });
    const until = Date.now() + 20_000;
    while (isFrozen(staging) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(isFrozen(staging)).toBe(false);
    fs.writeFileSync(path.join(staging, 'after'), 'the workload writes again');

    const answer = await createSnapshotUntilReady(clients, 'snap-1', volumeId, 60_000);
    const key = parseSnapshotId(answer.snapshot!.snapshot_id)!.key;
    const pool = cluster.pool('node-1');
    expect(fs.readdirSync(path.join(pool, 'snapshots', 'data'))).toEqual([key]);
    expect(fs.readdirSync(path.join(pool, 'snapshots', 'journal'))).toEqual([]);
    expect(fs.readdirSync(path.join(pool, 'frozen'))).toEqual([]);
    expect(isFrozen(staging)).toBe(false);
    await nodeRpcs(cluster.csi(restarted.endpoint)).unstage(volumeId, staging);
  });
});
