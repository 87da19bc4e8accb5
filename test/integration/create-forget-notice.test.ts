import { TOPOLOGY_NODE_KEY, createWorkflowId } from '../../common/names';
import { parseVolumeId } from '../../common/volume-id';
import { readNodeRecord } from '../../node-records/reads';
import { forgetNode } from '../../operations/forget-node';
import { nodeForgottenSignal } from '../../workflows/node-forgotten';
import { TestCluster } from '../support/cluster';
import { createAttempts, until } from '../support/create-history';
import { codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';

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
    await until(
      async () =>
        (await createAttempts(temporal, cluster.driverName, name)).length >= count ||
        (await running(name)) !== 'RUNNING',
      `${name} schedules allocation ${count}`,
    );
  };

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
    await until(
      async () => (await readNodeRecord(temporal, cluster.driverName, 'node-c'))?.node?.live === false,
      'node-c is offline',
    );
    const workflowId = createWorkflowId(cluster.driverName, 'pvc-late-notice');
    await until(
      async () => (await forgetNode(temporal, cluster.driverName, 'node-c', 'test')).released.includes(workflowId),
      'the forget of node-c reaches the create',
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
    await until(async () => cluster.volumesOnDisk('node-c').length === 0, "node-c's stray allocation is deleted");
    expect(cluster.volumesOnDisk('node-d')).toEqual(allocated);
  });
});
