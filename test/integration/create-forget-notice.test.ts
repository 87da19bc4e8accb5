import fs from 'node:fs';
import path from 'node:path';
import { TOPOLOGY_NODE_KEY, createWorkflowId, nodeForgottenSignal, parseVolumeId } from '../../common/names';
import { readNodeRecord } from '../../node-records/reads';
import { forgetNode } from '../../operations/forget-node';
import { TestCluster } from '../support/cluster';
import { createAttempts } from '../support/create-history';
import { codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';

/** The agent SIGKILLs itself after allocating, before answering: the create must complete on that node. */
const DIES_AFTER_ALLOCATING = { failpoints: 'create.after-allocate' };

/**
 * Invariant 4 around `nodes forget`: a create whose first try on a node may have allocated must complete there
 * unless that very node is forgotten. A forget notice names one node; it must not end the completion on another
 * (issue 17, item 3: the create once kept one notice for the whole workflow, whatever node it named).
 */
describe('forget notices reach a create completing on a node', () => {
  const cluster = new TestCluster('create-forget');
  let clients: ReturnType<TestCluster['csi']>;

  beforeAll(async () => {
    await Promise.all(['node-b', 'node-c', 'node-d'].map((nodeId) => cluster.startNode(nodeId, DIES_AFTER_ALLOCATING)));
    clients = cluster.csi((await cluster.startController()).endpoint);
  });
  afterAll(() => cluster.teardown());

  const running = async (name: string) => {
    const temporal = await cluster.temporal();
    return (await temporal.workflow.getHandle(createWorkflowId(cluster.driverName, name)).describe()).status.name;
  };
  /** The create's allocation number `count` was scheduled, or the create ended without it. */
  const scheduledOrEnded = async (name: string, count: number) => {
    const temporal = await cluster.temporal();
    await eventually(
      `${name} schedules allocation ${count}`,
      async () =>
        (await createAttempts(temporal, cluster.driverName, name)).length >= count ||
        (await running(name)) !== 'RUNNING',
      90_000,
    );
  };

  /** The pool identity a node's pool directory holds (pool.json), read directly. */
  const poolIdOnDisk = (nodeId: string) =>
    (JSON.parse(fs.readFileSync(path.join(cluster.pool(nodeId), 'pool.json'), 'utf8')) as { poolId: string }).poolId;

  it('a forget of node A delivered to a create completing on node B does not skip B', async () => {
    const request = createRequest('pvc-foreign-notice', undefined, onNode('node-b'));
    expect(await codeOf(createVolume(clients, request, 4000))).toBe('ABORTED');
    await scheduledOrEnded('pvc-foreign-notice', 2);
    const temporal = await cluster.temporal();
    expect(await createAttempts(temporal, cluster.driverName, 'pvc-foreign-notice')).toEqual(['node-b', 'node-b']);
    const allocated = cluster.volumesOnDisk('node-b');
    expect(allocated).toHaveLength(1);

    // As a forget of node-a would arrive when visibility still listed this create under node-a.
    const handle = temporal.workflow.getHandle(createWorkflowId(cluster.driverName, 'pvc-foreign-notice'));
    await handle.signal(nodeForgottenSignal, { nodeId: 'node-a', reason: 'test', at: new Date().toISOString() });
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(await running('pvc-foreign-notice')).toBe('RUNNING');

    await cluster.startNode('node-b');
    const answer = await retryLikeCo(() => createVolume(clients, request));
    expect(parseVolumeId(answer.volume!.volume_id)).toMatchObject({ nodeId: 'node-b', key: allocated[0] });
    expect(cluster.volumesOnDisk('node-b')).toEqual(allocated);
  });

  it('a create that left a forgotten node completes on the next one, whose first try died too', async () => {
    const [c, d] = ['node-c', 'node-d'].map((nodeId) => ({ segments: { [TOPOLOGY_NODE_KEY]: nodeId } }));
    const request = createRequest('pvc-late-notice', undefined, {
      accessibility_requirements: { requisite: [c!, d!], preferred: [c!] },
    });
    expect(await codeOf(createVolume(clients, request, 4000))).toBe('ABORTED');
    await scheduledOrEnded('pvc-late-notice', 2);
    const temporal = await cluster.temporal();
    await eventually(
      'node-c is offline',
      async () => (await readNodeRecord(temporal, cluster.driverName, 'node-c'))?.node?.live === false,
      90_000,
    );
    const workflowId = createWorkflowId(cluster.driverName, 'pvc-late-notice');
    await eventually(
      'the forget of node-c reaches the create',
      async () => (await forgetNode(temporal, cluster.driverName, 'node-c', 'test')).released.includes(workflowId),
      90_000,
    );
    // It moves on to node-d, whose first try dies as well: the completion there must run, notice or not.
    await scheduledOrEnded('pvc-late-notice', 4);
    expect(await createAttempts(temporal, cluster.driverName, 'pvc-late-notice')).toEqual([
      'node-c',
      'node-c',
      'node-d',
      'node-d',
    ]);
    const allocated = cluster.volumesOnDisk('node-d');
    expect(allocated).toHaveLength(1);

    await cluster.startNode('node-d');
    const answer = await retryLikeCo(() => createVolume(clients, request));
    expect(parseVolumeId(answer.volume!.volume_id)).toMatchObject({ nodeId: 'node-d', key: allocated[0] });
    expect(cluster.volumesOnDisk('node-d')).toEqual(allocated);

    // node-c had allocated the same key before it was forgotten. Back with that pool, its record deletes the
    // allocation the create left there: nothing leaks (the soak's forget-then-return found it left on disk).
    expect(cluster.volumesOnDisk('node-c')).toEqual(allocated);
    await cluster.startNode('node-c');
    await eventually(
      "node-c's stray allocation is deleted",
      async () => cluster.volumesOnDisk('node-c').length === 0,
      90_000,
    );
    expect(cluster.volumesOnDisk('node-d')).toEqual(allocated);
  });

  it('the allocation of a node whose pool was replaced after placement is deleted when the node returns', async () => {
    const agent = await cluster.startNode('node-e');
    const temporal = await cluster.temporal();
    const oldPool = (await readNodeRecord(temporal, cluster.driverName, 'node-e'))!.node!.poolId;
    // The agent dies; until the record notices (the heartbeat timeout), placement still sees the old pool live.
    await agent.kill('SIGKILL');
    const request = createRequest('pvc-replaced-pool', undefined, onNode('node-e'));
    const created = codeOf(createVolume(clients, request, 4000));
    // The old pool is gone (wiped); the operator accepts a new one, whose agent allocates and dies before answering.
    fs.rmSync(cluster.pool('node-e'), { recursive: true });
    fs.mkdirSync(cluster.pool('node-e'));
    const accept = [`--accept-new-pool=${oldPool}`];
    await cluster.startNode('node-e', { ...DIES_AFTER_ALLOCATING, extra: accept, waitReady: false });
    expect(await created).toBe('ABORTED');
    await scheduledOrEnded('pvc-replaced-pool', 2);
    const allocated = cluster.volumesOnDisk('node-e');
    expect(allocated).toHaveLength(1);
    const newPool = poolIdOnDisk('node-e');
    expect(newPool).not.toBe(oldPool);

    await eventually(
      'node-e is offline',
      async () => (await readNodeRecord(temporal, cluster.driverName, 'node-e'))?.node?.live === false,
      90_000,
    );
    const workflowId = createWorkflowId(cluster.driverName, 'pvc-replaced-pool');
    await eventually(
      'the forget of node-e reaches the create',
      async () => (await forgetNode(temporal, cluster.driverName, 'node-e', 'test')).released.includes(workflowId),
      90_000,
    );
    await eventually('the create ends', async () => (await running('pvc-replaced-pool')) !== 'RUNNING', 90_000);
    // Back with the new pool, which the create may have allocated on: its record deletes the allocation there.
    await cluster.startNode('node-e');
    expect(poolIdOnDisk('node-e')).toBe(newPool);
    await eventually(
      "node-e's stray allocation is deleted",
      async () => cluster.volumesOnDisk('node-e').length === 0,
      30_000,
    );
  });
});
