import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { moveWorkflowId, parseSnapshotId, parseVolumeId } from '../../common/names';
import { forgetNode } from '../../operations/forget-node';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { MiB, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { describeTree } from '../support/describe-tree';
import { eventually } from '../support/eventually';
import { runCli } from '../support/run-cli';
import { testTemporalFlags } from '../support/test-temporal';
import { BLOCK_CAPABILITY, kubeletPaths, nodeRpcs } from './node-helpers';

/**
 * `volumes move` (issue 39, the Temporal side; docs/volume-moves.md) with a real Temporal dev server, a controller
 * and real agents on loop pools, serving node-to-node copies on loopback: a move copies the data (the new image's
 * sha256 equals the source's), the new volume on the target and the old one still on the source; a second request
 * attaches; the target SIGKILLed half way through the pull resumes from its checkpoint; a target without room rolls
 * back and keeps nothing; bad input is refused with nothing made. Block volumes, written to directly as a workload
 * writes its device, so the copy carries data chunks (a fresh volume is holes, never sent).
 */
describe('moving a volume to another node', () => {
  const cluster = new TestCluster('move');
  afterAll(() => cluster.teardown());
  const SIZE = 128 * MiB;
  const ports = new Map<string, number>();

  /** The agent last started for each node. */
  const agents = new Map<string, ManagedProcess>();
  const startAgent = async (nodeId: string, capacity: string, failpoints?: string): Promise<ManagedProcess> => {
    if (!ports.has(nodeId)) ports.set(nodeId, await findFreePort());
    const extra = ['--transfer-port', String(ports.get(nodeId)), '--transfer-address', '127.0.0.1'];
    const agent = await cluster.startNode(nodeId, { backend: 'loop', capacity, extra, failpoints });
    agents.set(nodeId, agent);
    return agent;
  };
  const stopAgent = (nodeId: string) => agents.get(nodeId)!.stop();
  const cli = (...args: string[]) =>
    runCli([...args, '--driver-name', cluster.driverName, ...testTemporalFlags()], { timeoutMs: 120_000 });
  const image = (nodeId: string, volumeId: string) =>
    path.join(cluster.pool(nodeId), 'volumes', parseVolumeId(volumeId)!.key, 'disk.img');
  const sha256 = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');
  const entries = (nodeId: string, dir: string) => {
    const full = path.join(cluster.pool(nodeId), dir);
    return fs.existsSync(full) ? fs.readdirSync(full).sort() : [];
  };
  /** A block volume on node-a with `dataBytes` of random data written at its start (as its workload would). */
  const volumeWithData = async (name: string, dataBytes: number): Promise<string> => {
    const request = createRequest(name, SIZE, { ...onNode('node-a'), volume_capabilities: [BLOCK_CAPABILITY] });
    const made = await retryLikeCo(() => createVolume(clients(), request));
    const volumeId = made.volume!.volume_id;
    const file = fs.openSync(image('node-a', volumeId), 'r+');
    fs.writeSync(file, randomBytes(dataBytes), 0, dataBytes, 0);
    fs.fsyncSync(file);
    fs.closeSync(file);
    return volumeId;
  };
  let controllerEndpoint = '';
  const clients = () => cluster.csi(controllerEndpoint);
  /** What a test made, deleted (the pools are shared by the tests after it). */
  const removeAll = async (volumeIds: string[], snapshotIds: string[]) => {
    for (const id of snapshotIds) expect((await cli('snapshots', 'delete', id)).code).toBe(0);
    for (const id of volumeIds) await retryLikeCo(() => deleteVolume(clients(), id));
  };

  /**
   * A move of the volume to `target` whose node `dying.nodeId` (its agent stopped by the caller) kills itself at the
   * failpoint, then the move terminated (it runs no code to clean up); returns that node's agent started again.
   */
  const terminatedMove = async (
    volumeId: string,
    target: string,
    dying: { nodeId: string; failpoint: string },
  ): Promise<ManagedProcess> => {
    const doomed = await startAgent(dying.nodeId, '1Gi', dying.failpoint);
    const first = cli('volumes', 'move', volumeId, '--to', target);
    await doomed.exited;
    expect(doomed.child.signalCode).toBe('SIGKILL');
    const temporal = await cluster.temporal();
    await temporal.workflow.getHandle(moveWorkflowId(cluster.driverName, volumeId)).terminate('the test');
    expect((await first).code).toBe(1);
    return startAgent(dying.nodeId, '1Gi');
  };

  let nodeA: ManagedProcess | undefined;
  beforeAll(async () => {
    nodeA = await startAgent('node-a', '1Gi');
    controllerEndpoint = (await cluster.startController('controller', ['--snapshots'])).endpoint;
  });

  let sourceId = '';
  let noRoomId = '';
  let nodeC: ManagedProcess | undefined;

  it('copies the data to a new volume on the target, resuming after the target dies mid-pull; a second request attaches', async () => {
    const doomed = await startAgent('node-b', '1Gi', 'move.pull-half');
    const volumeId = await volumeWithData('pvc-moved', SIZE);
    sourceId = volumeId;
    const before = sha256(image('node-a', volumeId));

    const first = cli('volumes', 'move', volumeId, '--to', 'node-b', '--output', 'json');
    await doomed.exited;
    expect(doomed.child.signalCode).toBe('SIGKILL');
    const staged = JSON.parse(
      fs.readFileSync(
        path.join(cluster.pool('node-b'), 'transfers', 'in', entries('node-b', 'transfers/in')[0]!, 'checkpoint.json'),
        'utf8',
      ),
    ) as { verifiedChunks: number };
    expect(staged.verifiedChunks).toBeGreaterThanOrEqual(16);

    // While the target is down, the move waits for it, and `volumes describe` says where it stands.
    const described = await cli('volumes', 'describe', volumeId);
    expect(described.stdout).toMatch(/move {2}\S+\/move\/\S+ {2}RUNNING {2}phase (pulling|waiting-for-node) on node-b/);

    const second = cli('volumes', 'move', volumeId, '--to', 'node-b', '--output', 'json');
    await startAgent('node-b', '1Gi');
    const [one, two] = await Promise.all([first, second]);
    expect(two.stderr).toContain(`attached to ${moveWorkflowId(cluster.driverName, volumeId)}`);
    // The progress the CLI prints while it waits: the pull's chunks and bytes, from its heartbeats.
    expect(one.stderr).toMatch(/pulling on node-b, copied \d+ of 32 chunks \(128Mi\)/);
    expect(one.code).toBe(0);
    expect(two.code).toBe(0);
    const result = JSON.parse(one.stdout) as {
      newVolumeId: string;
      fetchedBytes: number;
      resumedFromChunk: number;
      chunkCount: number;
    };
    expect(JSON.parse(two.stdout)).toEqual(result);
    const moved = result.newVolumeId;
    expect(parseVolumeId(moved)?.nodeId).toBe('node-b');
    expect(result.chunkCount).toBe(SIZE / (4 * MiB));
    // The pull that completed started from the checkpoint the killed one left, and fetched only what it lacked.
    expect(result.resumedFromChunk).toBeGreaterThanOrEqual(staged.verifiedChunks);
    expect(result.fetchedBytes).toBeLessThanOrEqual(SIZE - staged.verifiedChunks * 4 * MiB);

    expect(sha256(image('node-b', moved))).toBe(before);
    expect(sha256(image('node-a', volumeId))).toBe(before);
    expect(cluster.volumesOnDisk('node-a')).toEqual([parseVolumeId(volumeId)!.key]);
    expect(cluster.volumesOnDisk('node-b')).toEqual([parseVolumeId(moved)!.key]);
    // What the move kept on either side is gone: the source's snapshot and offer, the target's staged copy.
    expect(entries('node-a', 'snapshots/data')).toEqual([]);
    expect(entries('node-a', 'transfers/out')).toEqual([]);
    expect(entries('node-b', 'transfers/in')).toEqual([]);

    const after = await cli('volumes', 'describe', volumeId);
    expect(after.stdout).toMatch(/move {2}\S+ {2}COMPLETED {2}phase copied/);
    expect(after.stdout).toMatch(new RegExp(`workflow-completed +copied to ${moved} on node node-b \\(the source`));
    // Asked again once done: answered from the move that copied it, nothing copied again.
    const again = await cli('volumes', 'move', volumeId, '--to', 'node-b', '--output', 'json');
    expect(again.code).toBe(0);
    expect((JSON.parse(again.stdout) as { newVolumeId: string }).newVolumeId).toBe(moved);
  });

  it('moves a dir volume to a dir node as an archive of its tree (owners, modes, links kept); never to a loop node', async () => {
    const dirAgent = async (nodeId: string) => {
      ports.set(nodeId, await findFreePort());
      const extra = ['--transfer-port', String(ports.get(nodeId)), '--transfer-address', '127.0.0.1'];
      return cluster.startNode(nodeId, { backend: 'dir', capacity: '1Gi', extra });
    };
    await Promise.all([dirAgent('dir-a'), dirAgent('dir-b')]);
    const made = await retryLikeCo(() =>
      createVolume(clients(), createRequest('pvc-dir-moved', SIZE, onNode('dir-a'))),
    );
    const volumeId = made.volume!.volume_id;
    const tree = (nodeId: string, id: string) => path.join(cluster.pool(nodeId), 'volumes', parseVolumeId(id)!.key);
    // What a workload leaves in its volume: nested directories, data, a private file of another user, a link.
    const source = tree('dir-a', volumeId);
    fs.mkdirSync(path.join(source, 'app/logs'), { recursive: true });
    fs.writeFileSync(path.join(source, 'app/logs/today'), randomBytes(5 * MiB));
    fs.writeFileSync(path.join(source, 'app/secret'), 'key');
    fs.chmodSync(path.join(source, 'app/secret'), 0o600);
    fs.chownSync(path.join(source, 'app/secret'), 999, 999);
    fs.symlinkSync('logs/today', path.join(source, 'app/latest'));
    const before = describeTree(source);

    const toLoop = await cli('volumes', 'move', volumeId, '--to', 'node-b');
    expect(toLoop.stderr).toMatch(
      /FailedPrecondition: node node-b runs the loop backend: a dir volume moves only to a dir pool/,
    );
    const answer = await cli('volumes', 'move', volumeId, '--to', 'dir-b', '--output', 'json');
    expect(answer.code).toBe(0);
    const moved = (JSON.parse(answer.stdout) as { newVolumeId: string }).newVolumeId;
    expect(parseVolumeId(moved)?.nodeId).toBe('dir-b');
    expect(describeTree(tree('dir-b', moved))).toEqual(before);
    expect(describeTree(source)).toEqual(before);
    // The source's snapshot, offer and archive, and the target's staged copy: gone.
    expect(entries('dir-a', 'snapshots/data')).toEqual([]);
    expect(entries('dir-a', 'transfers/out')).toEqual([]);
    expect(entries('dir-b', 'transfers/in')).toEqual([]);
  });

  it('moves a snapshot: its copy a snapshot on the target that keeps its source volume ID, listed and restorable there; a second request attaches', async () => {
    const volumeId = await volumeWithData('pvc-snapped', 32 * MiB);
    const made = await cli('snapshots', 'create', '--source', volumeId, '--name', 'snap-moved', '--output', 'json');
    expect(made.code).toBe(0);
    const snapshotId = (JSON.parse(made.stdout) as { snapshotId: string }).snapshotId;
    const snapshotImage = (nodeId: string, id: string) =>
      path.join(cluster.pool(nodeId), 'snapshots', 'data', parseSnapshotId(id)!.key, 'disk.img');
    const before = sha256(snapshotImage('node-a', snapshotId));

    const [one, two] = await Promise.all([
      cli('snapshots', 'move', snapshotId, '--to', 'node-b', '--output', 'json'),
      cli('snapshots', 'move', snapshotId, '--to', 'node-b', '--output', 'json'),
    ]);
    expect(one.code).toBe(0);
    expect(two.code).toBe(0);
    const result = JSON.parse(one.stdout) as { outcome: string; newSnapshotId: string; chunkCount: number };
    expect(JSON.parse(two.stdout)).toEqual(result);
    expect(result).toMatchObject({ outcome: 'copied', snapshotId, targetNodeId: 'node-b', chunkCount: 32 });
    const moved = result.newSnapshotId;
    expect(parseSnapshotId(moved)?.nodeId).toBe('node-b');
    expect(sha256(snapshotImage('node-b', moved))).toBe(before);
    expect(sha256(snapshotImage('node-a', snapshotId))).toBe(before); // copied: the source untouched
    expect(entries('node-a', 'transfers/out')).toEqual([]);
    expect(entries('node-b', 'transfers/in')).toEqual([]);
    // Where an operator looks: the snapshot's move, its phase and outcome, by the snapshot's ID.
    const described = await cli('volumes', 'describe', snapshotId);
    expect(described.stdout).toMatch(/snapshot-move {2}\S+\/move\/\S+ {2}COMPLETED {2}phase copied/);
    expect(described.stdout).toMatch(new RegExp(`workflow-completed +copied to ${moved} on node node-b \\(the source`));

    // Listed on the target as a snapshot of the volume it was taken of, on node-a; not as one of node-b's volumes.
    const listed = await cli('snapshots', 'list', '--output', 'json');
    const snapshots = (JSON.parse(listed.stdout) as { snapshots: { snapshotId: string; sourceVolumeId: string }[] })
      .snapshots;
    expect(snapshots.find((snapshot) => snapshot.snapshotId === moved)).toMatchObject({
      sourceVolumeId: volumeId,
      nodeId: 'node-b',
      name: expect.stringMatching(/^move-[0-9a-f]{32}$/),
    });
    // A restore from it is made on its node, with its data.
    const restored = await retryLikeCo(() =>
      createVolume(
        clients(),
        createRequest('pvc-restored-moved', SIZE, {
          volume_capabilities: [BLOCK_CAPABILITY],
          volume_content_source: { snapshot: { snapshot_id: moved } },
        }),
      ),
    );
    const restoredId = restored.volume!.volume_id;
    expect(parseVolumeId(restoredId)?.nodeId).toBe('node-b');
    const data = (file: string) => fs.readFileSync(file).subarray(0, 32 * MiB);
    expect(data(image('node-b', restoredId)).equals(data(image('node-a', volumeId)))).toBe(true);

    // A dir pool's snapshot moves as an archive of its tree.
    const dirVolume = await retryLikeCo(() =>
      createVolume(clients(), createRequest('pvc-dir-snapped', SIZE, onNode('dir-a'))),
    );
    const dirId = dirVolume.volume!.volume_id;
    const tree = path.join(cluster.pool('dir-a'), 'volumes', parseVolumeId(dirId)!.key);
    fs.mkdirSync(path.join(tree, 'db'));
    fs.writeFileSync(path.join(tree, 'db/pages'), randomBytes(3 * MiB));
    fs.symlinkSync('db/pages', path.join(tree, 'current'));
    const dirSnapshot = await cli('snapshots', 'create', '--source', dirId, '--name', 'snap-dir', '--output', 'json');
    const dirSnapshotId = (JSON.parse(dirSnapshot.stdout) as { snapshotId: string }).snapshotId;
    const snapshotTree = (nodeId: string, id: string) =>
      path.join(cluster.pool(nodeId), 'snapshots', 'data', parseSnapshotId(id)!.key);
    const dirBefore = describeTree(snapshotTree('dir-a', dirSnapshotId));
    const toLoop = await cli('snapshots', 'move', dirSnapshotId, '--to', 'node-b');
    expect(toLoop.stderr).toMatch(/FailedPrecondition: node node-b runs the loop backend: a dir snapshot moves only/);
    const dirMove = await cli('snapshots', 'move', dirSnapshotId, '--to', 'dir-b', '--output', 'json');
    expect(dirMove.code).toBe(0);
    const dirMoved = (JSON.parse(dirMove.stdout) as { newSnapshotId: string }).newSnapshotId;
    expect(describeTree(snapshotTree('dir-b', dirMoved))).toEqual(dirBefore);
    expect(entries('dir-a', 'transfers/out')).toEqual([]);
    expect(entries('dir-b', 'transfers/in')).toEqual([]);

    // Refused before anything starts.
    const unknown = snapshotId.replace(/_[0-9a-f]{32}$/, `_${'d'.repeat(32)}`);
    const refusals: [string[], RegExp][] = [
      [[volumeId, '--to', 'node-b'], /InvalidArgument: "\S+" is not a snapshot ID this driver issued/],
      [[moved, '--to', 'node-b'], /InvalidArgument: snapshot \S+ is already on node node-b/],
      [[unknown, '--to', 'node-b'], /NotFound: snapshot \S+ does not exist on node node-a/],
      [[snapshotId, '--to', 'dir-b'], /AlreadyExists: snapshot \S+ was moved \(or copied\) to node node-b/],
      [[snapshotId], /takes --to NODE \(a move\) or --cancel/],
    ];
    for (const [args, said] of refusals) {
      const answer = await cli('snapshots', 'move', ...args);
      expect({ args, code: answer.code, stderr: answer.stderr }).toEqual({
        args,
        code: 1,
        stderr: expect.stringMatching(said),
      });
    }
    await removeAll([volumeId, restoredId, dirId], [snapshotId, moved, dirSnapshotId, dirMoved]);
  });

  it("goes on after a snapshot's source dies right after its offer, and its target half way through the pull and right after the adopt", async () => {
    // Data in every chunk: the pull's failpoint counts the chunks it has fetched.
    const volumeId = await volumeWithData('pvc-snap-crashed', SIZE);
    const snapshotImage = (nodeId: string, id: string) =>
      path.join(cluster.pool(nodeId), 'snapshots', 'data', parseSnapshotId(id)!.key, 'disk.img');
    // Each step is done again to the same end, and the move completes with the copy whole.
    const second = await cli('snapshots', 'create', '--source', volumeId, '--name', 'snap-crashed', '--output', 'json');
    const crashedId = (JSON.parse(second.stdout) as { snapshotId: string }).snapshotId;
    const crashedBefore = sha256(snapshotImage('node-a', crashedId));
    await nodeA!.stop();
    const sourceDying = await startAgent('node-a', '1Gi', 'move.after-offer');
    await stopAgent('node-b');
    const targetDying = await startAgent('node-b', '1Gi', 'move.pull-half');
    const crashing = cli('snapshots', 'move', crashedId, '--to', 'node-b', '--output', 'json');
    await sourceDying.exited;
    expect(sourceDying.child.signalCode).toBe('SIGKILL');
    nodeA = await startAgent('node-a', '1Gi');
    await targetDying.exited;
    expect(targetDying.child.signalCode).toBe('SIGKILL');
    const adoptDying = await startAgent('node-b', '1Gi', 'move.after-adopt');
    await adoptDying.exited;
    expect(adoptDying.child.signalCode).toBe('SIGKILL');
    await startAgent('node-b', '1Gi');
    const crashed = await crashing;
    expect({ code: crashed.code, stderr: crashed.code === 0 ? '' : crashed.stderr }).toEqual({ code: 0, stderr: '' });
    const crashedMove = JSON.parse(crashed.stdout) as { newSnapshotId: string; resumedFromChunk: number };
    expect(crashedMove.resumedFromChunk).toBeGreaterThanOrEqual(16);
    expect(sha256(snapshotImage('node-b', crashedMove.newSnapshotId))).toBe(crashedBefore);
    expect(entries('node-a', 'transfers/out')).toEqual([]);
    expect(entries('node-b', 'transfers/in')).toEqual([]);
    await removeAll([volumeId], [crashedId, crashedMove.newSnapshotId]);
  }, 300_000);

  it('rolls a snapshot move terminated mid-pull back on --cancel: its offer and staged copy gone, the snapshot where it was', async () => {
    const volumeId = await volumeWithData('pvc-snap-terminated', SIZE);
    const made = await cli(
      'snapshots',
      'create',
      '--source',
      volumeId,
      '--name',
      'snap-terminated',
      '--output',
      'json',
    );
    const snapshotId = (JSON.parse(made.stdout) as { snapshotId: string }).snapshotId;
    const copy = path.join(cluster.pool('node-a'), 'snapshots', 'data', parseSnapshotId(snapshotId)!.key, 'disk.img');
    const before = sha256(copy);
    await stopAgent('node-b');
    const doomed = await startAgent('node-b', '1Gi', 'move.pull-half');
    const moving = cli('snapshots', 'move', snapshotId, '--to', 'node-b');
    await doomed.exited;
    expect(doomed.child.signalCode).toBe('SIGKILL');
    const temporal = await cluster.temporal();
    await temporal.workflow.getHandle(moveWorkflowId(cluster.driverName, snapshotId)).terminate('the test');
    expect((await moving).code).toBe(1);
    await startAgent('node-b', '1Gi');
    expect(entries('node-b', 'transfers/in')).toHaveLength(1);
    expect(entries('node-a', 'transfers/out')).toHaveLength(1);

    const cancelled = await cli('snapshots', 'move', snapshotId, '--cancel');
    expect({ code: cancelled.code, stderr: cancelled.stderr }).toEqual({ code: 0, stderr: '' });
    expect(cancelled.stdout).toMatch(
      /^cancelled: .*rolled back, the snapshot untouched on node-a: move \w+ was terminated/,
    );
    expect(entries('node-b', 'transfers/in')).toEqual([]);
    expect(entries('node-a', 'transfers/out')).toEqual([]);
    expect(sha256(copy)).toBe(before);
    // It may be moved again, and the copy is whole.
    const again = await cli('snapshots', 'move', snapshotId, '--to', 'node-b', '--output', 'json');
    expect(again.code).toBe(0);
    const movedId = (JSON.parse(again.stdout) as { newSnapshotId: string }).newSnapshotId;
    const movedCopy = path.join(cluster.pool('node-b'), 'snapshots', 'data', parseSnapshotId(movedId)!.key, 'disk.img');
    expect(sha256(movedCopy)).toBe(before);
    await removeAll([volumeId], [snapshotId, movedId]);
  }, 300_000);

  it('rolls back a move to a target without room: nothing left on the target, the source untouched', async () => {
    nodeC = await startAgent('node-c', '64Mi');
    const volumeId = await volumeWithData('pvc-no-room', 8 * MiB);
    noRoomId = volumeId;
    const before = sha256(image('node-a', volumeId));
    const answer = await cli('volumes', 'move', volumeId, '--to', 'node-c');
    expect(answer.code).toBe(1);
    expect(answer.stderr).toMatch(/ResourceExhausted: the move of \S+ to node-c rolled back, the volume untouched/);
    // Refused by the reservation the target makes before its pull writes anything (the room the adopt will need).
    expect(answer.stderr).toMatch(/cannot reserve \S+ for the copy of move \w+: \S+ of the pool's 64Mi is available/);
    expect(cluster.poolEntries('node-c').filter((entry) => entry.startsWith('transfers/in/'))).toEqual([]);
    expect(cluster.volumesOnDisk('node-c')).toEqual([]);
    expect(entries('node-a', 'snapshots/data')).toEqual([]);
    expect(entries('node-a', 'transfers/out')).toEqual([]);
    expect(sha256(image('node-a', volumeId))).toBe(before);
    const described = await cli('volumes', 'describe', volumeId);
    expect(described.stdout).toMatch(/move {2}\S+ {2}FAILED {2}phase rolled-back/);
  });

  it('refuses bad input precisely, and starts nothing', async () => {
    const temporal = await cluster.temporal();
    const volumeId = noRoomId; // its move rolled back: it may be moved again
    const unknownVolume = volumeId.replace(/_[0-9a-f]{32}$/, `_${'e'.repeat(32)}`);
    const poolB = cluster.poolEntries('node-b');
    const refusals: [string[], RegExp][] = [
      [['not-a-volume', '--to', 'node-b'], /InvalidArgument: "not-a-volume" is not a volume ID this driver issued/],
      [[volumeId, '--to', 'Node_B'], /InvalidArgument: --to "Node_B" is not a node ID/],
      [[volumeId, '--to', 'node-a'], /InvalidArgument: volume \S+ is already on node node-a/],
      [[volumeId, '--to', 'node-zz'], /NotFound: node node-zz is unknown: no agent has registered it/],
      [[unknownVolume, '--to', 'node-b'], /NotFound: volume \S+ does not exist on node node-a/],
      [[volumeId, '--pvc', 'default/data', '--to', 'node-b'], /takes a volume ID or --pvc NAMESPACE\/NAME, one of/],
      [['--pvc', 'data', '--to', 'node-b'], /NAMESPACE\/NAME/],
      [
        [sourceId, '--to', 'node-c'],
        /AlreadyExists: volume \S+ was moved \(or copied\) to node node-b \(\S+\); that stands/,
      ],
    ];
    for (const [args, said] of refusals) {
      const answer = await cli('volumes', 'move', ...args);
      expect({ args, code: answer.code, stderr: answer.stderr }).toEqual({
        args,
        code: 1,
        stderr: expect.stringMatching(said),
      });
    }
    // An offline target, then a forgotten one.
    await nodeC!.stop();
    await cluster.untilOffline('node-c');
    const offline = await cli('volumes', 'move', unknownVolume, '--to', 'node-c');
    expect(offline.stderr).toMatch(
      /Unavailable: node node-c is offline \(last heartbeat \S+\): a volume moves only to a live node/,
    );
    await forgetNode(temporal, cluster.driverName, 'node-c', 'retired');
    const forgotten = await cli('volumes', 'move', unknownVolume, '--to', 'node-c');
    expect(forgotten.stderr).toMatch(
      /FailedPrecondition: node node-c was forgotten \(retired\): no volume moves to it/,
    );

    for (const id of [unknownVolume]) {
      await expect(temporal.workflow.getHandle(moveWorkflowId(cluster.driverName, id)).describe()).rejects.toThrow(
        /not found/i,
      );
    }
    expect(cluster.poolEntries('node-b')).toEqual(poolB);
  });

  it('waits for a source that is down, says so, and completes when it returns', async () => {
    const volumeId = noRoomId; // its move to node-c rolled back: it may be moved again
    await nodeA!.stop();
    await cluster.untilOffline('node-a');
    const move = cli('volumes', 'move', volumeId, '--to', 'node-b');
    const workflowId = moveWorkflowId(cluster.driverName, volumeId);
    const temporal = await cluster.temporal();
    await eventually(
      'the move started',
      async () => (await temporal.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING',
    );
    const described = await cli('volumes', 'describe', volumeId);
    expect(described.stdout).toContain('node    node-a: offline');
    expect(described.stdout).toMatch(/move {2}\S+ {2}RUNNING {2}phase waiting-for-node on node-a/);
    expect(described.stdout).toMatch(/pending: fenceMoveOnNode scheduled/);
    const stuck = await cli('volumes', 'stuck', '--node', 'node-a');
    expect(stuck.stdout).toMatch(new RegExp(`move +${volumeId} +node-a +waiting-for-node`));

    nodeA = await startAgent('node-a', '1Gi');
    const answer = await move;
    expect(answer.stderr).toContain('node-a is offline: the move waits for it');
    expect(answer.code).toBe(0);
    const newVolumeId = answer.stdout.split('\t')[0]!;
    expect(parseVolumeId(newVolumeId)?.nodeId).toBe('node-b');
    expect(sha256(image('node-b', newVolumeId))).toBe(sha256(image('node-a', volumeId)));
    expect(cluster.volumesOnDisk('node-a')).toContain(parseVolumeId(volumeId)!.key);
  });

  it('goes on after the source dies right after holding the volume and the target right after the adopt made it', async () => {
    const volumeId = await volumeWithData('pvc-crashes', 16 * MiB);
    const before = sha256(image('node-a', volumeId));
    const recordFile = path.join(cluster.pool('node-a'), 'records', `${parseVolumeId(volumeId)!.key}.json`);
    await nodeA!.stop();
    const dyingSource = await startAgent('node-a', '1Gi', 'move.after-hold');
    const dyingTarget = await startAgent('node-d', '1Gi', 'move.after-adopt');
    const move = cli('volumes', 'move', volumeId, '--to', 'node-d', '--output', 'json');

    await dyingSource.exited;
    expect(dyingSource.child.signalCode).toBe('SIGKILL');
    // The hold is on disk before the step answered: a retry finds it its own.
    expect(JSON.parse(fs.readFileSync(recordFile, 'utf8'))).toMatchObject({ moving: { targetNodeId: 'node-d' } });
    nodeA = await startAgent('node-a', '1Gi');
    await dyingTarget.exited;
    expect(dyingTarget.child.signalCode).toBe('SIGKILL');
    expect(cluster.volumesOnDisk('node-d')).toHaveLength(1); // made, its staging not yet removed
    await startAgent('node-d', '1Gi');

    const answer = await move;
    expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
    const result = JSON.parse(answer.stdout) as { outcome: string; newVolumeId: string };
    expect(result.outcome).toBe('copied'); // a controller without --kubernetes: the copy, the source kept
    expect(cluster.volumesOnDisk('node-d')).toEqual([parseVolumeId(result.newVolumeId)!.key]);
    expect(sha256(image('node-d', result.newVolumeId))).toBe(before);
    expect(entries('node-d', 'transfers/in')).toEqual([]);
    // Let go once copied: the source's record holds no move.
    expect(JSON.parse(fs.readFileSync(recordFile, 'utf8'))).not.toHaveProperty('moving');
  });

  it('goes on after the source dies right after its offer, then right after withdrawing it at the release', async () => {
    const volumeId = await volumeWithData('pvc-offer-crashes', 16 * MiB);
    const before = sha256(image('node-a', volumeId));
    const snapshotsBefore = entries('node-a', 'snapshots/data');
    const offersBefore = entries('node-a', 'transfers/out');
    await nodeA!.stop();
    const diesAfterOffer = await startAgent('node-a', '1Gi', 'move.after-offer');
    const move = cli('volumes', 'move', volumeId, '--to', 'node-d', '--output', 'json');

    await diesAfterOffer.exited;
    expect(diesAfterOffer.child.signalCode).toBe('SIGKILL');
    // The offer is written before the step answered: the retry seals the same one again.
    expect(entries('node-a', 'transfers/out')).toHaveLength(offersBefore.length + 1);
    const diesAfterWithdraw = await startAgent('node-a', '1Gi', 'move.after-withdraw');
    await diesAfterWithdraw.exited;
    expect(diesAfterWithdraw.child.signalCode).toBe('SIGKILL');
    expect(entries('node-a', 'transfers/out')).toEqual(offersBefore);
    nodeA = await startAgent('node-a', '1Gi');

    const answer = await move;
    expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
    const result = JSON.parse(answer.stdout) as { outcome: string; newVolumeId: string };
    expect(result.outcome).toBe('copied');
    expect(sha256(image('node-d', result.newVolumeId))).toBe(before);
    // The release finished after the second death: the move's snapshot deleted, nothing offered or staged.
    expect(entries('node-a', 'snapshots/data')).toEqual(snapshotsBefore);
    expect(entries('node-a', 'transfers/out')).toEqual(offersBefore);
    expect(entries('node-d', 'transfers/in')).toEqual([]);
  });

  it('takes over the hold a terminated move left: the volume, refused to stage meanwhile, stages again once moved', async () => {
    const volumeId = await volumeWithData('pvc-terminated', 8 * MiB);
    await nodeA!.stop();
    nodeA = await terminatedMove(volumeId, 'node-b', { nodeId: 'node-a', failpoint: 'move.after-hold' });
    const node = nodeRpcs(cluster.csi(nodeA.endpoint));
    const { staging } = kubeletPaths(cluster, volumeId);
    await expect(node.stage(volumeId, staging, BLOCK_CAPABILITY)).rejects.toThrow(/being moved to node node-b/);

    const again = await cli('volumes', 'move', volumeId, '--to', 'node-b', '--output', 'json');
    expect({ code: again.code, stderr: again.code === 0 ? '' : again.stderr }).toEqual({ code: 0, stderr: '' });
    expect((JSON.parse(again.stdout) as { outcome: string }).outcome).toBe('copied');
    await node.stage(volumeId, staging, BLOCK_CAPABILITY);
    await node.unstage(volumeId, staging);
  });

  it('rolls a move terminated mid-pull back on --cancel: its hold, snapshot, offer and staged copy gone, the volume stages again', async () => {
    const volumeId = await volumeWithData('pvc-abandoned', SIZE);
    const before = sha256(image('node-a', volumeId));
    const snapshotsBefore = entries('node-a', 'snapshots/data');
    const onC = cluster.volumesOnDisk('node-c');
    await nodeC!.stop();
    nodeC = await terminatedMove(volumeId, 'node-c', { nodeId: 'node-c', failpoint: 'move.pull-half' });
    // What the terminated move left: the hold, its snapshot and offer on node-a, half a copy on node-c.
    const [moveKey] = entries('node-c', 'transfers/in');
    expect(entries('node-a', 'transfers/out')).toEqual([`${moveKey}.json`]);
    expect(entries('node-a', 'snapshots/data')).toHaveLength(snapshotsBefore.length + 1);
    const node = nodeRpcs(cluster.csi(nodeA!.endpoint));
    const { staging } = kubeletPaths(cluster, volumeId);
    await expect(node.stage(volumeId, staging, BLOCK_CAPABILITY)).rejects.toThrow(/being moved to node node-c/);

    const cancelled = await cli('volumes', 'move', volumeId, '--cancel');
    expect({ code: cancelled.code, stderr: cancelled.stderr }).toEqual({ code: 0, stderr: '' });
    expect(cancelled.stdout).toMatch(
      /^cancelled: the move of \S+ to node-c rolled back, the volume untouched on node-a: move \w+ was terminated/,
    );
    expect(entries('node-c', 'transfers/in')).toEqual([]);
    expect(entries('node-a', 'transfers/out')).toEqual([]);
    expect(entries('node-a', 'snapshots/data')).toEqual(snapshotsBefore);
    expect(cluster.volumesOnDisk('node-c')).toEqual(onC);
    expect(sha256(image('node-a', volumeId))).toBe(before);
    await node.stage(volumeId, staging, BLOCK_CAPABILITY);
    await node.unstage(volumeId, staging);
    const described = await cli('volumes', 'describe', volumeId);
    expect(described.stdout).toMatch(/move {2}\S+ {2}FAILED {2}phase rolled-back/);
    // Its rollback ended: nothing is left to cancel, and the volume may be moved again.
    const again = await cli('volumes', 'move', volumeId, '--cancel');
    expect(again.stderr).toMatch(/FailedPrecondition: the move of \S+ is not running: it ended FAILED/);
  });
});
