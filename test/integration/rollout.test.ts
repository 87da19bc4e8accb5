import type { Client } from '@temporalio/client';
import { TestCluster } from '../support/cluster';
import { codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { NODE_RECORD_WORKFLOW_TYPES } from '../../common/names';

/**
 * The leak this driver exists to prevent: a rolling restart where DeleteVolume arrives while the volume's node
 * is down. Nothing may be reported deleted until its node has really deleted it.
 */
/**
 * The controller answers ABORTED after its call wait (3 s in the tests, test/support/cluster.ts): the client's
 * deadline leaves it 5 s more, since a fresh controller under a loaded CI run once took over a second more than
 * 4 s to answer, and the CO then sees DEADLINE_EXCEEDED instead (also "not deleted", but not the answer tested).
 */
const ANSWER_DEADLINE_MS = 8000;

describe('rolling restart with deletions aimed at nodes that are down', () => {
  const cluster = new TestCluster('rollout');
  afterAll(() => cluster.teardown());

  it('never reports a volume deleted before its node deletes it, then deletes every one', async () => {
    const nodes = ['node-1', 'node-2', 'node-3'];
    const agents = await Promise.all(nodes.map((nodeId) => cluster.startNode(nodeId)));
    const controller = await cluster.startController('before');
    const before = cluster.csi(controller.endpoint);
    const volumeIds: string[] = [];
    for (const nodeId of nodes) {
      for (const index of [1, 2]) {
        const answer = await retryLikeCo(() =>
          createVolume(before, createRequest(`pvc-${nodeId}-${index}`, undefined, onNode(nodeId))),
        );
        volumeIds.push(answer.volume!.volume_id);
      }
    }
    for (const nodeId of nodes) expect(cluster.volumesOnDisk(nodeId)).toHaveLength(2);

    // Everything goes down; a fresh controller comes up with no memory of anything.
    await Promise.all([...agents, controller].map((process) => process.kill('SIGKILL')));
    const after = cluster.csi((await cluster.startController('after')).endpoint);

    for (let round = 0; round < 2; round++) {
      const codes = await Promise.all(
        volumeIds.map((volumeId) => codeOf(deleteVolume(after, volumeId, ANSWER_DEADLINE_MS))),
      );
      expect(codes).toEqual(volumeIds.map(() => 'ABORTED'));
    }
    // The answer tells an operator which node the deletion waits for, and for how long.
    const waiting = await deleteVolume(after, volumeIds[0]!, ANSWER_DEADLINE_MS).catch((error: Error) => error.message);
    expect(waiting).toMatch(/deletion of v1_node-1_\w+ has waited \d+s for node node-1 \(last heartbeat \d+s ago/);
    for (const nodeId of nodes) expect(cluster.volumesOnDisk(nodeId)).toHaveLength(2);

    await Promise.all(nodes.map((nodeId) => cluster.startNode(nodeId)));
    for (const volumeId of volumeIds) await retryLikeCo(() => deleteVolume(after, volumeId));
    for (const nodeId of nodes) expect(cluster.volumesOnDisk(nodeId)).toEqual([]);
    expect(await runningWorkflows(await cluster.temporal(), cluster.driverName)).toEqual([]);
  });
});

async function runningWorkflows(client: Client, driverName: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const workflow of client.workflow.list({ query: 'ExecutionStatus = "Running"' })) {
    if (workflow.workflowId.startsWith(`${driverName}/`) && !NODE_RECORD_WORKFLOW_TYPES.includes(workflow.type))
      ids.push(workflow.workflowId);
  }
  return ids;
}
