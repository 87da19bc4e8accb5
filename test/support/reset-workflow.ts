import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';

/** Resets a running workflow to its first workflow task, as an operator's reset in the Temporal UI does. */
export async function resetToFirstTask(client: Client, workflowId: string, reason: string): Promise<void> {
  let description;
  try {
    description = await client.workflow.getHandle(workflowId).describe();
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return;
    throw error;
  }
  if (description.status.name !== 'RUNNING') return;
  const history = await client.workflow.getHandle(workflowId, description.runId).fetchHistory();
  const firstTask = history.events?.find((event) => event.workflowTaskCompletedEventAttributes);
  if (!firstTask?.eventId) return;
  await client.workflowService.resetWorkflowExecution({
    namespace: client.options.namespace,
    workflowExecution: { workflowId, runId: description.runId },
    reason,
    workflowTaskFinishEventId: firstTask.eventId,
    requestId: `${workflowId}-${Date.now()}`,
  });
}
