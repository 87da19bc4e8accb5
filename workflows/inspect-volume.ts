import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { NodeActivities, NodeVolume } from '../activities/node-activities';
import { FailureType } from '../common/failures';
import { nodeTaskQueue } from '../common/names';

/** Asks a volume's node whether it holds the volume; a node that does not answer soon is Unavailable. */
export async function inspectVolume(input: {
  driverName: string;
  nodeId: string;
  key: string;
  poolIdPrefix: string;
}): Promise<NodeVolume | undefined> {
  const onNode = proxyActivities<NodeActivities>({
    taskQueue: nodeTaskQueue(input.driverName, input.nodeId),
    scheduleToStartTimeout: '10s',
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 1 },
  });
  try {
    return await onNode.getVolumeOnNode({ key: input.key, poolIdPrefix: input.poolIdPrefix });
  } catch (error) {
    if (!(error instanceof ActivityFailure) || error.cause instanceof ApplicationFailure) throw error;
    throw ApplicationFailure.create({
      type: FailureType.Unavailable,
      message: `node ${input.nodeId} did not answer; try again when it is up`,
      nonRetryable: true,
    });
  }
}
