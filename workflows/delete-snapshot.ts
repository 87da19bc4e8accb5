import { proxyActivities, setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { NodeActivities, NodeDeleteOutcome } from '../activities/node-activities';
import { deleteOptions } from './node-activity-options';
import type { ForgetNotice } from '../common/names';
import { listenForForget } from './node-forgotten';
import { followNodeLiveness } from './node-liveness';
import { PhaseKey } from '../common/names';
import { recordWriteOff } from './record-write-off';

export interface DeleteSnapshotInput {
  driverName: string;
  snapshotId: string;
  nodeId: string;
  key: string;
  poolIdPrefix: string;
  /** The node's liveness as its record showed when the request arrived (undefined: no record); drives the phase. */
  nodeLive?: boolean;
  /** The node was already forgotten for good when the request arrived: the recorded decision ends the deletion. */
  forgotten?: ForgetNotice;
}

export interface DeleteSnapshotResult {
  outcome: NodeDeleteOutcome | 'node-forgotten';
  nodeId: string;
  /** For node-forgotten: the operator's reason. */
  reason?: string;
}

/**
 * The truth rules of deleteVolume: the copy is removed on its own node and nowhere else; the node activity has no
 * schedule-to-start timeout, so for a node that is down or unknown the task waits in its queue until the agent
 * returns. Only the node's pool (`deleted`, `absent`, `pool-replaced`) or the decision that the node is gone for
 * good (`node-forgotten`) ends it.
 */
export async function deleteSnapshot(input: DeleteSnapshotInput): Promise<DeleteSnapshotResult> {
  const untilForgotten = listenForForget();
  const liveness = followNodeLiveness();
  if (input.forgotten) return writtenOff(input, input.forgotten);
  liveness.waitOn({ nodeId: input.nodeId, doing: 'snapshot deletion' }, input.nodeLive, workflowInfo().startTime, true);
  const onNode = proxyActivities<NodeActivities>(
    deleteOptions(input.driverName, input.nodeId, `delete snapshot ${input.key} from the pool of ${input.nodeId}`),
  );
  const result = await untilForgotten(input.nodeId, () =>
    onNode.deleteSnapshotOnNode({ key: input.key, poolIdPrefix: input.poolIdPrefix }),
  );
  liveness.stop();
  if (result.forgotten) return writtenOff(input, result.notice);
  return finish({ outcome: result.value, nodeId: input.nodeId });
}

/**
 * As deleteVolume's write-off: the node is gone for good, so nothing deleted the copy. Before the CO is told it is
 * gone, the copy is kept on the node's record, which deletes it should the node return with this pool.
 */
async function writtenOff(input: DeleteSnapshotInput, notice: ForgetNotice): Promise<DeleteSnapshotResult> {
  const copy = { volumeId: input.snapshotId, key: input.key, poolIdPrefix: input.poolIdPrefix, reason: notice.reason };
  await recordWriteOff(input.driverName, input.nodeId, { ...copy, kind: 'snapshot' });
  return finish({ outcome: 'node-forgotten', nodeId: input.nodeId, reason: notice.reason });
}

function finish(result: DeleteSnapshotResult): DeleteSnapshotResult {
  upsertSearchAttributes([{ key: PhaseKey, value: 'done' }]);
  setCurrentDetails(`done: ${result.outcome}${result.reason ? ` (${result.reason})` : ''}`);
  return result;
}
