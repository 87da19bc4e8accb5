import type { Client } from '@temporalio/client';
import { createWorkflowId, nodeTaskQueue } from '../../common/names';

/**
 * The nodes a create workflow has asked to allocate so far, in order, read from its history: one entry per
 * `createVolumeOnNode` scheduled (the first try, then the completion on the same node, then the next node...).
 */
export async function createAttempts(client: Client, driverName: string, name: string): Promise<string[]> {
  const history = await client.workflow.getHandle(createWorkflowId(driverName, name)).fetchHistory();
  const prefix = nodeTaskQueue(driverName, '');
  return (history.events ?? []).flatMap((event) => {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name !== 'createVolumeOnNode') return [];
    const queue = scheduled.taskQueue?.name ?? '';
    return [queue.startsWith(prefix) ? queue.slice(prefix.length) : queue];
  });
}
