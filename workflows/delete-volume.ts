import { proxyActivities, setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities, NodeDeleteOutcome } from '../activities/node-activities';
import { NON_RETRYABLE_TYPES } from '../common/failures';
import { nodeTaskQueue } from '../common/names';
import { listenForForget } from './node-forgotten';
import { NodeIdKey, PhaseKey, WaitingSinceKey } from './search-attribute-keys';

export interface DeleteVolumeInput {
  driverName: string;
  volumeId: string;
  nodeId: string;
  key: string;
  poolIdPrefix: string;
}

export interface DeleteVolumeResult {
  outcome: NodeDeleteOutcome | 'node-never-registered' | 'node-forgotten';
  nodeId: string;
  /** For node-forgotten: the operator's reason. */
  reason?: string;
}

const control = proxyActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { maximumInterval: '10s' },
});

/**
 * Deletes on the volume's home node and nowhere else. The node activity has no schedule-to-start timeout: when
 * the node is down the task simply waits in the node's queue until its agent returns (the whole point of this
 * driver). Retries never give up; only an operator's decision that the node is gone ends the wait.
 */
export async function deleteVolume(input: DeleteVolumeInput): Promise<DeleteVolumeResult> {
  const untilForgotten = listenForForget();
  const nodes = await control.readRegistry();
  const node = nodes.find((candidate) => candidate.nodeId === input.nodeId);
  upsertSearchAttributes([{ key: NodeIdKey, value: input.nodeId }]);
  if (!node) {
    // Volumes are only ever placed on registered nodes, and the registry forgets a node only when told to.
    return finish({ outcome: 'node-never-registered', nodeId: input.nodeId });
  }
  const now = new Date();
  if (node.live) {
    upsertSearchAttributes([{ key: PhaseKey, value: 'running' }]);
    setCurrentDetails(`deleting on node ${input.nodeId}`);
  } else {
    upsertSearchAttributes([
      { key: PhaseKey, value: 'waiting-for-node' },
      { key: WaitingSinceKey, value: now },
    ]);
    const heard = new Date(node.lastHeartbeat).toISOString();
    setCurrentDetails(`waiting for node ${input.nodeId} since ${now.toISOString()} (last heartbeat ${heard})`);
  }
  const onNode = proxyActivities<NodeActivities>({
    taskQueue: nodeTaskQueue(input.driverName, input.nodeId),
    startToCloseTimeout: '60s',
    heartbeatTimeout: '10s',
    retry: { initialInterval: '1s', maximumInterval: '30s', nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES] },
    summary: `delete volume ${input.key} from the pool of ${input.nodeId}`,
  });
  const result = await untilForgotten(() =>
    onNode.deleteVolumeOnNode({ key: input.key, poolIdPrefix: input.poolIdPrefix }),
  );
  if (result.forgotten) {
    return finish({ outcome: 'node-forgotten', nodeId: input.nodeId, reason: result.notice.reason });
  }
  return finish({ outcome: result.value, nodeId: input.nodeId });
}

function finish(result: DeleteVolumeResult): DeleteVolumeResult {
  upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
  setCurrentDetails(`done: ${result.outcome}${result.reason ? ` (${result.reason})` : ''}`);
  return result;
}
