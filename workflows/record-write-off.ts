import { proxyActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { WrittenOffVolume } from '../common/names';

// Retried until it is recorded: the write-off is what makes an answer about a forgotten node true.
const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '30s', retry: { maximumInterval: '10s' } });

/**
 * Keeps a volume or snapshot copy the CO was told is gone, while its node is forgotten, on that node's record
 * (workflows/written-off-volumes.ts), which deletes it there should the node return with the same pool.
 */
export function recordWriteOff(driverName: string, nodeId: string, volume: WrittenOffVolume): Promise<void> {
  return control.recordWriteOff({ driverName, nodeId, volume });
}
