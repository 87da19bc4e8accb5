import type { Client } from '@temporalio/client';
import { TOPOLOGY_NODE_KEY, createWorkflowId, nodeForgottenSignal } from '../../common/names';
import type { CsiClients } from '../../csi/client';
import { readNodeRecord } from '../../node-records/reads';
import { forgetNode } from '../../operations/forget-node';
import type { TestCluster } from '../support/cluster';
import { createAttempts } from '../support/create-history';
import { codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';

/** The agent SIGKILLs itself after allocating, before answering: the create must complete on that node. */
const DIES_AFTER_ALLOCATING = { failpoints: 'create.after-allocate' };

/**
 * Creates whose first try dies on the node, recorded for the replay test: the completion path (the phase following
 * the node's liveness signals), a completion ended by `nodes forget` and moving on to the next node (whose own
 * first try dies too), and a completion that receives a forget notice naming another node. Each runs on nodes of
 * its own; returns fixture name -> workflow ID. Whatever each create's end (earlier builds skipped the next node's
 * completion and failed), the history is what is kept.
 */
export async function recordCreateScenarios(
  cluster: TestCluster,
  clients: CsiClients,
  temporal: Client,
): Promise<Record<string, string>> {
  await Promise.all(['node-3', 'node-4', 'node-5', 'node-6'].map((n) => cluster.startNode(n, DIES_AFTER_ALLOCATING)));
  const scenario = new Scenario(cluster, clients, temporal);
  await Promise.all([scenario.completion(), scenario.forgotten(), scenario.foreignForget()]);
  return {
    'create-volume-completion': createWorkflowId(cluster.driverName, 'pvc-completion'),
    'create-volume-forgotten': createWorkflowId(cluster.driverName, 'pvc-forgotten'),
    'create-volume-foreign-forget': createWorkflowId(cluster.driverName, 'pvc-foreign-forget'),
  };
}

class Scenario {
  constructor(
    private readonly cluster: TestCluster,
    private readonly clients: CsiClients,
    private readonly temporal: Client,
  ) {}

  /** Node-3 dies, its record turns offline (a liveness signal), it returns (another) and the create completes. */
  async completion(): Promise<void> {
    const request = createRequest('pvc-completion', undefined, onNode('node-3'));
    await this.firstTryDies('pvc-completion', request, 'node-3');
    await this.offline('node-3');
    await new Promise((resolve) => setTimeout(resolve, 2000)); // the announcement reaches the create
    await this.cluster.startNode('node-3');
    await retryLikeCo(() => createVolume(this.clients, request));
  }

  /** Node-4 dies and is forgotten while the create completes there; it moves on to node-5, which dies too. */
  async forgotten(): Promise<void> {
    const [four, five] = [
      { segments: { [TOPOLOGY_NODE_KEY]: 'node-4' } },
      { segments: { [TOPOLOGY_NODE_KEY]: 'node-5' } },
    ];
    const request = createRequest('pvc-forgotten', undefined, {
      accessibility_requirements: { requisite: [four, five], preferred: [four] },
    });
    await this.firstTryDies('pvc-forgotten', request, 'node-4');
    await this.offline('node-4');
    const workflowId = createWorkflowId(this.cluster.driverName, 'pvc-forgotten');
    await eventually(
      'the forget of node-4 reaches the create',
      async () =>
        (await forgetNode(this.temporal, this.cluster.driverName, 'node-4', 'recorded')).released.includes(workflowId),
      90_000,
    );
    await eventually(
      'the create tries node-5',
      async () => (await this.attempts('pvc-forgotten')).includes('node-5'),
      90_000,
    );
    await this.completionBegunOrEnded('pvc-forgotten', 4);
    await this.cluster.startNode('node-5');
    await this.ended('pvc-forgotten');
  }

  /** A forget notice naming another node reaches a create completing on node-6. */
  async foreignForget(): Promise<void> {
    const request = createRequest('pvc-foreign-forget', undefined, onNode('node-6'));
    await this.firstTryDies('pvc-foreign-forget', request, 'node-6');
    const handle = this.temporal.workflow.getHandle(createWorkflowId(this.cluster.driverName, 'pvc-foreign-forget'));
    const at = new Date().toISOString();
    await handle.signal(nodeForgottenSignal, { nodeId: 'node-elsewhere', reason: 'recorded: another node', at });
    await new Promise((resolve) => setTimeout(resolve, 2000));
    await this.cluster.startNode('node-6');
    await this.ended('pvc-foreign-forget');
  }

  /** Starts the create; its first try on `nodeId` kills the agent, and the completion there is scheduled. */
  private async firstTryDies(name: string, request: ReturnType<typeof createRequest>, nodeId: string) {
    await codeOf(createVolume(this.clients, request, 4000));
    await this.completionBegunOrEnded(name, 2);
    const attempts = await this.attempts(name);
    if (attempts[1] !== nodeId)
      throw new Error(`${name}: expected a completion on ${nodeId}, got ${attempts.join(', ')}`);
  }

  private attempts(name: string) {
    return createAttempts(this.temporal, this.cluster.driverName, name);
  }

  /** The `count`th node allocation was scheduled, or the workflow ended (earlier builds skip the completion). */
  private completionBegunOrEnded(name: string, count: number) {
    const handle = this.temporal.workflow.getHandle(createWorkflowId(this.cluster.driverName, name));
    return eventually(
      `${name} schedules allocation ${count} or ends`,
      async () => (await this.attempts(name)).length >= count || (await handle.describe()).status.name !== 'RUNNING',
      90_000,
    );
  }

  private offline(nodeId: string) {
    return eventually(
      `${nodeId} is offline`,
      async () => (await readNodeRecord(this.temporal, this.cluster.driverName, nodeId))?.node?.live === false,
      90_000,
    );
  }

  private ended(name: string) {
    const handle = this.temporal.workflow.getHandle(createWorkflowId(this.cluster.driverName, name));
    return eventually(`${name} ends`, async () => (await handle.describe()).status.name !== 'RUNNING', 90_000);
  }
}
