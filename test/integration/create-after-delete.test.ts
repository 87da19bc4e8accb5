import fs from 'node:fs';
import { call } from '../../csi/client';
import { createWorkflowId, deleteWorkflowId } from '../../common/names';
import { DriverError, FailureType } from '../../common/failures';
import { VolumeOperations } from '../../operations/volume-operations';
import type { CreateVolumeInput } from '../../workflows/create-volume';
import { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, deleteVolume, retryLikeCo } from '../support/csi-requests';

/**
 * A name whose volume was deleted may be created again, but only by a request sent after the deletion: a stale
 * CreateVolume (the CO gave up on it long ago) that reaches the controller late must not leak a new volume, and
 * concurrent re-creates make one volume. The soak found the stale case: a call stuck behind a Temporal restart.
 */
describe('CreateVolume after DeleteVolume of the same name', () => {
  const cluster = new TestCluster('recreate');
  const nodes = ['node-a', 'node-b'];
  const onDisk = () => nodes.flatMap((nodeId) => cluster.volumesOnDisk(nodeId));
  let clients: ReturnType<TestCluster['csi']>[] = [];
  let paused: Awaited<ReturnType<TestCluster['startController']>>;

  beforeAll(async () => {
    await Promise.all(nodes.map((nodeId) => cluster.startNode(nodeId)));
    const [first, second] = await Promise.all([cluster.startController('c1'), cluster.startController('c2')]);
    paused = second;
    clients = [cluster.csi(first.endpoint), cluster.csi(second.endpoint)];
  });
  afterAll(async () => {
    paused?.child.kill('SIGCONT');
    await cluster.teardown();
  });

  /** The run ID of the name's newest create workflow: a stale request that created again would change it. */
  const newestCreateRun = async (name: string) => {
    const temporal = await cluster.temporal();
    return (await temporal.workflow.getHandle(createWorkflowId(cluster.driverName, name)).describe()).runId;
  };

  const createAndDelete = async (name: string) => {
    const created = await retryLikeCo(() => createVolume(clients[0]!, createRequest(name)));
    const volumeId = created.volume!.volume_id;
    await retryLikeCo(() => deleteVolume(clients[0]!, volumeId));
    expect(onDisk()).toEqual([]);
    return volumeId;
  };

  it('ten concurrent re-creates through two controllers make exactly one new volume', async () => {
    const deletedId = await createAndDelete('pvc-reused');
    const request = createRequest('pvc-reused', 96 * MiB);
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, index) => retryLikeCo(() => createVolume(clients[index % 2]!, request))),
    );
    const ids = new Set(answers.map((answer) => answer.volume?.volume_id));
    expect(ids.size).toBe(1);
    expect([...ids][0]).not.toBe(deletedId);
    expect(onDisk()).toHaveLength(1);
    await retryLikeCo(() => deleteVolume(clients[0]!, [...ids][0]!));
    expect(onDisk()).toEqual([]);
  });

  it('a request that arrived before the deletion started is refused with ABORTED and creates nothing', async () => {
    const before = new Date();
    const deletedId = await createAndDelete('pvc-late');
    const runBefore = await newestCreateRun('pvc-late');
    const temporal = await cluster.temporal();
    const operations = new VolumeOperations(temporal, cluster.driverName);
    const input: CreateVolumeInput = {
      driverName: cluster.driverName,
      name: 'pvc-late',
      capacityBytes: 64 * MiB,
      parameters: {},
      accessType: 'mount',
      preferred: [],
    };
    const range = { requiredBytes: 64 * MiB, limitBytes: 0 };
    const late = operations.create(input, range, 3000, { receivedAt: before, abandoned: () => false });
    await expect(late).rejects.toThrow(DriverError);
    await expect(late).rejects.toMatchObject({ type: FailureType.Aborted, message: /was deleted after this request/ });
    expect(onDisk()).toEqual([]);
    expect(await newestCreateRun('pvc-late')).toBe(runBefore);

    // Sent after the deletion, the same request makes a new volume.
    const fresh = await untilDone(() =>
      operations.create(input, range, 10_000, { receivedAt: new Date(), abandoned: () => false }),
    );
    expect(fresh.volumeId).not.toBe(deletedId);
    expect(onDisk()).toHaveLength(1);
    await retryLikeCo(() => deleteVolume(clients[0]!, fresh.volumeId));
  });

  it('a call the CO gave up on, still queued in a paused controller when the volume is deleted, creates nothing', async () => {
    const created = await retryLikeCo(() => createVolume(clients[0]!, createRequest('pvc-stale')));
    const volumeId = created.volume!.volume_id;
    const runBefore = await newestCreateRun('pvc-stale');
    // The connection to c2 is up before it freezes, so the request lands in its socket and waits there.
    await call((done) => clients[1]!.controller.ControllerGetCapabilities({}, done));
    const logStart = fs.statSync(cluster.log('c2')).size;
    paused.child.kill('SIGSTOP');
    try {
      expect(await codeOf(createVolume(clients[1]!, createRequest('pvc-stale'), 1500))).toBe('DEADLINE_EXCEEDED');
      await retryLikeCo(() => deleteVolume(clients[0]!, volumeId));
      expect(onDisk()).toEqual([]);
    } finally {
      paused.child.kill('SIGCONT');
    }
    const answered = await waitForLogLine(
      cluster.log('c2'),
      logStart,
      (line) => line.includes('"method":"CreateVolume"') && !line.includes('"msg":"call"'),
    );
    expect(answered).toContain('the caller gave up on this request');
    expect(await newestCreateRun('pvc-stale')).toBe(runBefore);
    const temporal = await cluster.temporal();
    expect(
      (await temporal.workflow.getHandle(deleteWorkflowId(cluster.driverName, volumeId)).describe()).status.name,
    ).toBe('COMPLETED');
    expect(onDisk()).toEqual([]);
  });
});

/** Repeats an operation that answers Aborted (still in progress), as the CO would. */
async function untilDone<T>(attempt: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof DriverError) || error.type !== FailureType.Aborted || Date.now() > until) throw error;
    }
  }
}

/** Waits until the process has answered the call: a matching line written after `from` bytes of its log. */
async function waitForLogLine(
  file: string,
  from: number,
  matches: (line: string) => boolean,
  timeoutMs = 60_000,
): Promise<string> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const found = fs.readFileSync(file).subarray(from).toString('utf8').split('\n').find(matches);
    if (found) return found;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`no matching line in ${file} after ${timeoutMs} ms: the paused controller never answered the call`);
}
