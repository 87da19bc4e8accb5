import type { WorkflowExecutionDescription } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';

/** pendingActivities[].state of a started activity (temporal.api.enums.v1.PendingActivityState). */
const STARTED = 2;

/**
 * When a createSnapshot workflow's copy is running on its node now: the attempt's start, for the answer's
 * creation_time. Started is the server's word: an agent that dies mid-copy stops heartbeating, and after the
 * heartbeat timeout the attempt is no longer started (it waits for the node again). Undefined when the copy
 * waits for its node.
 */
export function copyInProgressSince(description: WorkflowExecutionDescription): Date | undefined {
  if (description.status.name !== 'RUNNING') return undefined;
  const copy = (description.raw.pendingActivities ?? []).find(
    (activity) => activity.activityType?.name === 'createSnapshotOnNode' && activity.state === STARTED,
  );
  const started = optionalTsToMs(copy?.lastStartedTime);
  return started === undefined ? undefined : new Date(started);
}
