import { WorkflowNotFoundError } from '@temporalio/client';
import { createWorkflowId, deleteWorkflowId } from '../../common/names';
import { locateTemporalCli } from '../../temporal-dev/locate-cli';
import { createNamespace, registerSearchAttributes } from '../temporal-prod/namespace-setup';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { MiB, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { CONFIG_ENV, testTemporalConfig } from '../support/test-temporal';

/**
 * What a namespace's retention means for idempotency (docs/operations.md, "Retention"). Once a closed workflow is
 * deleted, Temporal no longer remembers the operation: a DeleteVolume repeated after that is still safe (the node's
 * pool is the truth, and the volume is not there). A CreateVolume retried after its workflow expired is a new
 * operation: the node's pool still returns the volume it holds under that name, but if placement picks another node
 * (the first one down, or fuller) a second volume is allocated and the first is an orphan. Run with a 3-second retention (the harness lowers the server's minimum
 * and jitter for tests only); production namespaces keep days.
 */
describe('retention of completed create and delete workflows', () => {
  const shared = testTemporalConfig();
  const namespace = `retention-${Date.now().toString(36)}`;
  const cluster = new TestCluster('retention');
  const nodes = ['node-r1', 'node-r2'];
  const agents = new Map<string, ManagedProcess>();
  const onDisk = () => nodes.flatMap((nodeId) => cluster.volumesOnDisk(nodeId));
  let clients: ReturnType<TestCluster['csi']>;

  beforeAll(async () => {
    const cli = await locateTemporalCli();
    await createNamespace(cli, shared, { name: namespace, retention: '3s' });
    await registerSearchAttributes(cli, shared, namespace);
    process.env[CONFIG_ENV] = JSON.stringify({ ...shared, namespace }); // this file's copy of the environment
    for (const nodeId of nodes) agents.set(nodeId, await cluster.startNode(nodeId));
    // A new namespace reaches every service's cache within seconds: the first calls may answer UNAVAILABLE.
    const controller = await cluster.startController('controller');
    clients = cluster.csi(controller.endpoint);
  });
  afterAll(async () => {
    await cluster.teardown();
    process.env[CONFIG_ENV] = JSON.stringify(shared);
  });

  /** Until Temporal has deleted the closed workflow (retention plus the timer's processing). */
  const expired = async (workflowId: string) => {
    const temporal = await cluster.temporal();
    const deadline = Date.now() + 90_000;
    for (;;) {
      try {
        await temporal.workflow.getHandle(workflowId).describe();
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return;
        throw error;
      }
      if (Date.now() > deadline) throw new Error(`${workflowId} still exists 90 s after it closed`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };

  it('a DeleteVolume repeated after its workflow expired answers OK and changes nothing', async () => {
    const created = await retryLikeCo(() => createVolume(clients, createRequest('pvc-ret-delete')));
    const volumeId = created.volume?.volume_id ?? '';
    await retryLikeCo(() => deleteVolume(clients, volumeId));
    expect(onDisk()).toEqual([]);
    await expired(deleteWorkflowId(cluster.driverName, volumeId));

    await retryLikeCo(() => deleteVolume(clients, volumeId));
    expect(onDisk()).toEqual([]);
  });

  it('a CreateVolume retried after its workflow expired finds the volume on the same node: the pool knows the name', async () => {
    const request = createRequest('pvc-ret-same', 64 * MiB, onNode('node-r1'));
    const first = await retryLikeCo(() => createVolume(clients, request));
    const firstId = first.volume?.volume_id ?? '';
    await expired(createWorkflowId(cluster.driverName, 'pvc-ret-same'));

    // The CO never got the first answer and retries now: a new workflow, a new key, the same name on node-r1.
    const late = await retryLikeCo(() => createVolume(clients, request));
    expect(late.volume?.volume_id).toBe(firstId);
    expect(cluster.volumesOnDisk('node-r1')).toHaveLength(1);
    await retryLikeCo(() => deleteVolume(clients, firstId));
    expect(onDisk()).toEqual([]);
  });

  it('placed on another node (its first node down), the late retry allocates a second volume', async () => {
    const request = createRequest('pvc-ret-moved');
    const first = await retryLikeCo(() => createVolume(clients, request));
    const firstId = first.volume?.volume_id ?? '';
    const home = nodes.find((nodeId) => firstId.includes(`_${nodeId}_`)) as string;
    const other = nodes.find((nodeId) => nodeId !== home) as string;
    await expired(createWorkflowId(cluster.driverName, 'pvc-ret-moved'));

    await agents.get(home)?.kill('SIGKILL');
    // Placement tries the silent node until its schedule-to-start timeout proves it never started, then moves on.
    const late = await retryLikeCo(() => createVolume(clients, request), 180_000);
    const lateId = late.volume?.volume_id ?? '';
    expect(lateId).toContain(`_${other}_`);
    expect(cluster.volumesOnDisk(home)).toHaveLength(1);
    expect(cluster.volumesOnDisk(other)).toHaveLength(1);

    // The first one is an orphan (no PV names it), still deletable by its ID once its node is back.
    agents.set(home, await cluster.startNode(home));
    for (const volumeId of [firstId, lateId]) await retryLikeCo(() => deleteVolume(clients, volumeId));
    expect(onDisk()).toEqual([]);
  });
});
