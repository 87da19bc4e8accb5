import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { NodeActivities, InspectedVolume } from '../activities/node-activities';
import { FailureType } from '../common/failures';
import { inspectOptions } from './node-work';

/** Asks a volume's node whether it holds the volume; a node that does not answer soon is Unavailable. */
export async function inspectVolume(input: {
  driverName: string;
  nodeId: string;
  key: string;
  poolIdPrefix: string;
}): Promise<InspectedVolume | undefined> {
  const onNode = proxyActivities<NodeActivities>(inspectOptions(input.driverName, input.nodeId));
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
