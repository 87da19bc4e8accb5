import { proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities, NodeDeleteOutcome } from '../activities/node-activities';
import { NON_RETRYABLE_TYPES } from '../common/failures';
import { nodeTaskQueue } from '../common/names';
import { NodeIdKey, PhaseKey, WaitingSinceKey } from './search-attribute-keys';

export interface DeleteVolumeInput {
  driverName: string;
  volumeId: string;
  nodeId: string;
  key: string;
  poolIdPrefix: string;
}

export interface DeleteVolumeResult {
  outcome: NodeDeleteOutcome | 'node-never-registered';
  nodeId: string;
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
  const nodes = await control.readRegistry();
  const node = nodes.find((candidate) => candidate.nodeId === input.nodeId);
  upsertSearchAttributes([{ key: NodeIdKey, value: input.nodeId }]);
  if (!node) {
    // Volumes are only ever placed on registered nodes, and the registry forgets nobody on its own.
    upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
    return { outcome: 'node-never-registered', nodeId: input.nodeId };
  }
  upsertSearchAttributes(
    node.live
      ? [{ key: PhaseKey, value: 'running' }]
      : [
          { key: PhaseKey, value: 'waiting-for-node' },
          { key: WaitingSinceKey, value: new Date() },
        ],
  );
  const onNode = proxyActivities<NodeActivities>({
    taskQueue: nodeTaskQueue(input.driverName, input.nodeId),
    startToCloseTimeout: '60s',
    heartbeatTimeout: '10s',
    retry: { initialInterval: '1s', maximumInterval: '30s', nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES] },
  });
  const outcome = await onNode.deleteVolumeOnNode({ key: input.key, poolIdPrefix: input.poolIdPrefix });
  upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
  return { outcome, nodeId: input.nodeId };
}
