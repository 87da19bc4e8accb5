import { ApplicationFailure, proxyActivities, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { NodeActivities } from '../activities/node-activities';
import { FailureType } from '../common/failures';
import { expandOptions, listenForForget, followNodeLiveness } from './node-work';
import { PhaseKey } from '../common/names';

export interface ExpandVolumeInput {
  driverName: string;
  volumeId: string;
  nodeId: string;
  key: string;
  poolIdPrefix: string;
  capacityBytes: number;
  /** The node's liveness as its record showed when the request arrived (undefined: no record); drives the phase. */
  nodeLive?: boolean;
}

export interface ExpandVolumeResult {
  capacityBytes: number;
  nodeExpansionRequired: boolean;
}

/**
 * Grows a volume on its home node. Like deletion, the node activity has no schedule-to-start timeout: for a
 * node that is down, the expansion waits in its queue until the agent returns. Growing is idempotent and
 * never shrinks, so a retry or a second request for a smaller size is harmless.
 */
export async function expandVolume(input: ExpandVolumeInput): Promise<ExpandVolumeResult> {
  const liveness = followNodeLiveness();
  liveness.waitOn({ nodeId: input.nodeId, doing: 'expansion' }, input.nodeLive, workflowInfo().startTime, true);
  const onNode = proxyActivities<NodeActivities>(
    expandOptions(input.driverName, input.nodeId, `grow ${input.volumeId} to ${input.capacityBytes} bytes`),
  );
  const untilForgotten = listenForForget();
  const result = await untilForgotten(input.nodeId, () =>
    onNode.expandVolumeOnNode({ key: input.key, poolIdPrefix: input.poolIdPrefix, capacityBytes: input.capacityBytes }),
  );
  liveness.stop();
  upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
  if (result.forgotten) {
    throw ApplicationFailure.create({
      type: FailureType.NotFound,
      message: `node ${input.nodeId} was forgotten (${result.notice.reason}); its volumes are gone`,
      nonRetryable: true,
    });
  }
  return result.value;
}
