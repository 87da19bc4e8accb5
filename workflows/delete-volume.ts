import { proxyActivities, setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities, NodeDeleteOutcome } from '../activities/node-activities';
import { deleteOptions } from './node-activity-options';
import type { ForgetNotice } from '../common/names';
import { listenForForget } from './node-forgotten';
import { followNodeLiveness } from './node-liveness';
import { PhaseKey } from '../common/names';

export interface DeleteVolumeInput {
  driverName: string;
  volumeId: string;
  nodeId: string;
  key: string;
  poolIdPrefix: string;
  /**
   * The node's liveness as its record showed when the request arrived: only what operators see depends on it.
   * Undefined when no record exists (the node is unknown). The controller starts the workflow with the matching
   * phase (search attributes set at start cost no extra write).
   */
  nodeLive?: boolean;
  /** The node was already forgotten for good when the request arrived: the recorded decision ends the deletion. */
  forgotten?: ForgetNotice;
}

export interface DeleteVolumeResult {
  outcome: NodeDeleteOutcome | 'node-forgotten';
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
 * the node is down (or unknown: no record is proof that a volume does not exist) the task simply waits in the
 * node's queue until its agent returns. Retries never give up; only the decision that the node is gone for good
 * (`durable-csi nodes forget`, recorded as the outcome) ends the wait.
 */
export async function deleteVolume(input: DeleteVolumeInput): Promise<DeleteVolumeResult> {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  if (input.forgotten) return writtenOff(input, input.forgotten);
  // The controller started this workflow with the node ID and the phase matching `nodeLive`.
  liveness.waitOn({ nodeId: input.nodeId, doing: 'deletion' }, input.nodeLive, workflowInfo().startTime, true);
  const onNode = proxyActivities<NodeActivities>(
    deleteOptions(input.driverName, input.nodeId, `delete volume ${input.key} from the pool of ${input.nodeId}`),
  );
  const result = await untilForgotten(input.nodeId, () =>
    onNode.deleteVolumeOnNode({ key: input.key, poolIdPrefix: input.poolIdPrefix }),
  );
  liveness.stop();
  if (result.forgotten) return writtenOff(input, result.notice);
  return finish({ outcome: result.value, nodeId: input.nodeId });
}

/**
 * The node is gone for good, so nothing deleted the volume. Before the CO is told it is gone, the volume is kept
 * on the node's record, which deletes it for real should the node ever return with this pool.
 */
async function writtenOff(input: DeleteVolumeInput, notice: ForgetNotice): Promise<DeleteVolumeResult> {
  const volume = { volumeId: input.volumeId, key: input.key, poolIdPrefix: input.poolIdPrefix, reason: notice.reason };
  await control.recordWriteOff({ driverName: input.driverName, nodeId: input.nodeId, volume });
  return finish({ outcome: 'node-forgotten', nodeId: input.nodeId, reason: notice.reason });
}

function finish(result: DeleteVolumeResult): DeleteVolumeResult {
  upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
  setCurrentDetails(`done: ${result.outcome}${result.reason ? ` (${result.reason})` : ''}`);
  return result;
}
