import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { readNodeRecord } from '../../node-records/reads';
import { deleteWorkflowId, nodeRecordWorkflowId, renewRecordSignal, PhaseKey } from '../../common/names';
import { TestCluster } from '../support/cluster';
import { resetToFirstTask } from '../support/reset-workflow';
import { codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';

/**
 * Node records may be lost at any time (terminated or reset by an operator, continued as new, a namespace restored
 * from backup). Nothing that depends on them may turn into a false "deleted": deletions of a node that is down
 * wait whatever happens to the records, and complete when the node returns.
 */
describe('node records: loss never proves a volume gone', () => {
  const cluster = new TestCluster('records');
  afterAll(() => cluster.teardown());

  it('keeps every deletion waiting through record renewals, terminations and resets, then deletes all', async () => {
    await cluster.startNode('node-1');
    const node2 = await cluster.startNode('node-2');
    const csi = cluster.csi((await cluster.startController()).endpoint);
    const client = await cluster.temporal();
    const volumeIds: string[] = [];
    for (let index = 0; index < 6; index++) {
      const answer = await retryLikeCo(() =>
        createVolume(csi, createRequest(`pvc-lost-${index}`, undefined, onNode('node-2'))),
      );
      volumeIds.push(answer.volume!.volume_id);
    }
    expect(cluster.volumesOnDisk('node-2')).toHaveLength(6);
    await node2.stop(); // SIGTERM: the record turns offline at once

    const answers: string[] = [];
    const record2 = nodeRecordWorkflowId(cluster.driverName, 'node-2');
    const record1 = nodeRecordWorkflowId(cluster.driverName, 'node-1');
    const renew = (workflowId: string) =>
      ifRunning(() => client.workflow.getHandle(workflowId).signal(renewRecordSignal));
    const faults: Array<() => Promise<unknown>> = [
      () => renew(record2),
      () => renew(record1),
      () => resetToFirstTask(client, record2, 'test: reset to the first workflow task'),
      () => renew(record2),
      () => ifRunning(() => client.workflow.getHandle(record2).terminate('test: the record is lost')),
      () => ifRunning(() => client.workflow.getHandle(record1).terminate('test: the record is lost')),
    ];
    for (let round = 0; round < 3; round++) {
      for (const [index, volumeId] of volumeIds.entries()) {
        await faults[(round * volumeIds.length + index) % faults.length]!();
        answers.push(await codeOf(deleteVolume(csi, volumeId, 2500)));
      }
    }
    expect(answers).toEqual(answers.map(() => 'ABORTED'));
    expect(cluster.volumesOnDisk('node-2')).toHaveLength(6);
    // node-1's agent runs: it makes its record again within moments of losing it.
    await eventually(
      'node-1 live',
      async () => (await readNodeRecord(client, cluster.driverName, 'node-1'))?.node?.live === true,
      30_000,
    );
    // The deletions record that they wait, whatever the record of their node shows.
    for (const volumeId of volumeIds) {
      const description = await client.workflow.getHandle(deleteWorkflowId(cluster.driverName, volumeId)).describe();
      expect(description.typedSearchAttributes.get(PhaseKey)).toBe('waiting-for-node');
    }

    await cluster.startNode('node-2');
    for (const volumeId of volumeIds) await retryLikeCo(() => deleteVolume(csi, volumeId));
    expect(cluster.volumesOnDisk('node-2')).toEqual([]);
    for (const volumeId of volumeIds) {
      const result = await client.workflow.getHandle(deleteWorkflowId(cluster.driverName, volumeId)).result();
      expect(result).toMatchObject({ outcome: 'deleted', nodeId: 'node-2' });
    }
    expect((await readNodeRecord(client, cluster.driverName, 'node-2'))?.node?.live).toBe(true);
  }, 240_000);

  it("follows its node's liveness while it waits: running, then waiting-for-node, then done", async () => {
    const node3 = await cluster.startNode('node-3');
    const csi = cluster.csi((await cluster.startController('controller-2')).endpoint);
    const client = await cluster.temporal();
    const answer = await retryLikeCo(() => createVolume(csi, createRequest('pvc-follow', undefined, onNode('node-3'))));
    const volumeId = answer.volume!.volume_id;
    await node3.kill('SIGKILL'); // its record still shows it live until the presence heartbeat times out
    expect(await codeOf(deleteVolume(csi, volumeId, 2500))).toBe('ABORTED');
    const handle = client.workflow.getHandle(deleteWorkflowId(cluster.driverName, volumeId));
    expect((await handle.describe()).typedSearchAttributes.get(PhaseKey)).toBe('running');
    await eventually(
      'the deletion waiting for its node',
      async () => (await handle.describe()).typedSearchAttributes.get(PhaseKey) === 'waiting-for-node',
      60_000,
    );
    expect(cluster.volumesOnDisk('node-3')).toHaveLength(1);
    // A create that can only go to the offline node: "cannot tell right now", never RESOURCE_EXHAUSTED.
    const stranded = await createVolume(csi, createRequest('pvc-stranded', undefined, onNode('node-3'))).catch(
      (error: Error & { code?: number }) => error,
    );
    expect(stranded).toMatchObject({ code: 14 }); // UNAVAILABLE
    expect((stranded as Error).message).toContain('1 offline or not answering');
    await cluster.startNode('node-3');
    await retryLikeCo(() => deleteVolume(csi, volumeId));
    expect((await handle.describe()).typedSearchAttributes.get(PhaseKey)).toBe('done');
    expect(cluster.volumesOnDisk('node-3')).toEqual([]);
  }, 180_000);
});

describe("node records: presence held with the agent's own timeout", () => {
  const cluster = new TestCluster('presence');
  afterAll(() => cluster.teardown());

  /** The heartbeat timeouts (ms) of the presence holds the record scheduled, oldest first, across its runs. */
  async function holdTimeouts(client: Client, nodeId: string): Promise<number[]> {
    const workflowId = nodeRecordWorkflowId(cluster.driverName, nodeId);
    const runs: { runId: string; startTime: Date }[] = [];
    for await (const run of client.workflow.list({ query: `WorkflowId = "${workflowId}"` })) runs.push(run);
    runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
    const timeouts: number[] = [];
    for (const run of runs) {
      const history = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
      for (const event of history.events ?? []) {
        const scheduled = event.activityTaskScheduledEventAttributes;
        if (scheduled?.activityType?.name !== 'holdPresence') continue;
        const timeout = scheduled.heartbeatTimeout;
        timeouts.push(Number(timeout?.seconds ?? 0) * 1000 + Math.round((timeout?.nanos ?? 0) / 1e6));
      }
    }
    return timeouts;
  }

  it('holds with 60 s by default and with --presence-timeout when set; a paused agent stays live, a dead one goes offline in time', async () => {
    const client = await cluster.temporal();
    const csi = cluster.csi((await cluster.startController()).endpoint);
    // An agent without the flag (the tests' 20 s given back to the default): 60 s, heartbeats every 50 s.
    await cluster.startNode('node-default', { extra: ['--presence-timeout', '60s'] });
    await eventually('node-default held', async () => (await holdTimeouts(client, 'node-default')).length > 0);
    expect(await holdTimeouts(client, 'node-default')).toEqual([60_000]);
    const defaultRecord = () => readNodeRecord(client, cluster.driverName, 'node-default');
    expect((await defaultRecord())?.node?.presenceTimeoutMs).toBe(60_000);
    // Its pool's figures still reach the record within seconds of a change (placement reads them), not at the
    // next heartbeat due.
    await retryLikeCo(() => createVolume(csi, createRequest('pvc-figures', undefined, onNode('node-default'))));
    const created = Date.now();
    await eventually('the new volume counted', async () => (await defaultRecord())?.node?.volumeCount === 1, 15_000);
    expect(Date.now() - created).toBeLessThan(15_000);

    const node = await cluster.startNode('node-p'); // the tests' 20 s: heartbeats every 10 s
    await eventually('node-p held', async () => (await holdTimeouts(client, 'node-p')).length > 0);
    expect(await holdTimeouts(client, 'node-p')).toEqual([20_000]);
    const live = async () => (await readNodeRecord(client, cluster.driverName, 'node-p'))?.node?.live;

    // Paused for less than its margin (an agent the kernel did not schedule, a long pause of its event loop): it
    // never shows offline, and the same hold goes on once it runs again.
    // never shows offline, and the same hold goes on once it runs again. Its last heartbeat may be up to 10 s old
    // when it stops, so a pause of 5 s leaves the margin (docs/scale.md) for its next heartbeat's RPC.
    const liveFor = async (ms: number) => {
      for (const until = Date.now() + ms; Date.now() < until;) {
        expect(await live()).toBe(true);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    };
    node.child.kill('SIGSTOP');
    try {
      await liveFor(5_000);
    } finally {
      node.child.kill('SIGCONT');
    }
    await liveFor(22_000); // past the timeout, had its heartbeats stopped
    expect(await holdTimeouts(client, 'node-p')).toEqual([20_000]);

    // Dead: offline once the server times its hold out, at most 20 s after its last heartbeat.
    await node.kill('SIGKILL');
    const killed = Date.now();
    await eventually('node-p offline', async () => (await live()) === false, 40_000);
    const seconds = (Date.now() - killed) / 1000;
    expect(seconds).toBeLessThan(25);
  }, 120_000);
});

describe("node records: read between a hold's end and the record's taking it in", () => {
  const cluster = new TestCluster('settling');
  afterAll(() => cluster.teardown());

  it("is settling, with the figures of the hold's start, until a controller runs the record again", async () => {
    const client = await cluster.temporal();
    const controller = await cluster.startController('controller-s');
    const csi = cluster.csi(controller.endpoint);
    const node = await cluster.startNode('node-s');
    const read = () => readNodeRecord(client, cluster.driverName, 'node-s');
    await eventually('node-s live', async () => (await read())?.node?.live === true, 30_000);
    // Made during the hold: only the hold's heartbeats count it, not the record's memo (the hold's start).
    await retryLikeCo(() => createVolume(csi, createRequest('pvc-settling', undefined, onNode('node-s'))));
    await eventually('counted by a heartbeat', async () => (await read())?.node?.volumeCount === 1, 15_000);

    // No controller runs the record's workflow tasks: its hold times out and nothing takes that in.
    await controller.kill('SIGKILL');
    await node.kill('SIGKILL');
    await eventually('the hold ended', async () => (await read())?.settling === true, 40_000);
    // Offline, and what a decision must not use as the node's last word: the counts of the hold's start.
    expect(await read()).toMatchObject({ settling: true, node: { live: false, volumeCount: 0 } });

    await cluster.startController('controller-s2');
    await cluster.untilOffline('node-s');
    const settled = await read();
    expect(settled?.settling).toBeUndefined();
    expect(settled?.node).toMatchObject({ live: false, volumeCount: 1 });
  }, 120_000);
});

/** A fault aimed at a record that an earlier fault already ended does nothing. */
async function ifRunning(fault: () => Promise<unknown>): Promise<void> {
  try {
    await fault();
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
  }
}
