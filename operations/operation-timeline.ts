import type { WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { Payload } from '@temporalio/common';
import { decodeTypedSearchAttributes } from '@temporalio/common/lib/converter/payload-search-attributes';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { nodeTaskQueue } from '../common/names';
import { formatBytes } from '../common/quantity';

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
type HistoryEvent = NonNullable<History['events']>[number];
type Failure = NonNullable<NonNullable<HistoryEvent['activityTaskFailedEventAttributes']>['failure']>;

/** One step of an operation, in words for people and in fields for scripts. */
export interface TimelineEvent {
  time: Date;
  /** workflow-started, activity-scheduled, activity-started, activity-completed, activity-failed, signal, search-attributes, workflow-completed, ... */
  event: string;
  detail: string;
  activityType?: string;
  taskQueue?: string;
  /** The node whose queue carries the activity. */
  nodeId?: string;
  attempt?: number;
  failure?: string;
  signal?: string;
}

export interface Timeline {
  events: TimelineEvent[];
  /** The decoded completion result; null while running or when the workflow did not complete. */
  result: unknown;
}

interface Scheduled {
  activityType: string;
  taskQueue: string;
  nodeId?: string;
}

/**
 * The history reduced to what an operator asks: what ran where, what failed and why, who intervened, how it
 * ended. Workflow tasks, markers and the like are left out.
 */
export function buildTimeline(history: History, workflowType: string, driverName: string): Timeline {
  const scheduled = new Map<string, Scheduled>();
  const nodeQueuePrefix = nodeTaskQueue(driverName, '');
  const events: TimelineEvent[] = [];
  let result: unknown = null;
  for (const event of history.events ?? []) {
    const time = new Date(optionalTsToMs(event.eventTime) ?? 0);
    const add: AddEvent = (name, detail, extra = {}) => events.push({ time, event: name, detail, ...extra });
    if (event.workflowExecutionCompletedEventAttributes) {
      result = decode(event.workflowExecutionCompletedEventAttributes.result?.payloads?.[0]) ?? null;
    }
    if (!addActivityEvent(event, scheduled, nodeQueuePrefix, add)) addWorkflowEvent(event, workflowType, result, add);
  }
  return { events, result };
}

type AddEvent = (name: string, detail: string, extra?: Partial<TimelineEvent>) => void;

/** An activity's scheduling, start, end or cancellation; false for any other event. */
function addActivityEvent(
  event: HistoryEvent,
  scheduled: Map<string, Scheduled>,
  nodeQueuePrefix: string,
  add: AddEvent,
): boolean {
  const activity = (id: unknown): Scheduled => scheduled.get(String(id)) ?? { activityType: '?', taskQueue: '?' };
  if (event.activityTaskScheduledEventAttributes) {
    const attributes = event.activityTaskScheduledEventAttributes;
    const taskQueue = attributes.taskQueue?.name ?? '?';
    const nodeId = taskQueue.startsWith(nodeQueuePrefix) ? taskQueue.slice(nodeQueuePrefix.length) : undefined;
    const entry: Scheduled = { activityType: attributes.activityType?.name ?? '?', taskQueue, nodeId };
    scheduled.set(String(event.eventId), entry);
    const where = nodeId ? `node ${nodeId}` : taskQueue;
    add('activity-scheduled', `${entry.activityType} on ${where}`, entry);
  } else if (event.activityTaskStartedEventAttributes) {
    const attributes = event.activityTaskStartedEventAttributes;
    const what = activity(attributes.scheduledEventId);
    const last = attributes.lastFailure ? `; last failure: ${failureText(attributes.lastFailure)}` : '';
    const detail = `${what.activityType} attempt ${attributes.attempt ?? 1} by ${attributes.identity ?? '?'}${last}`;
    add('activity-started', detail, { ...what, attempt: attributes.attempt ?? 1 });
  } else if (event.activityTaskCompletedEventAttributes) {
    const what = activity(event.activityTaskCompletedEventAttributes.scheduledEventId);
    add('activity-completed', what.activityType, what);
  } else if (event.activityTaskFailedEventAttributes) {
    const attributes = event.activityTaskFailedEventAttributes;
    const what = activity(attributes.scheduledEventId);
    const failure = failureText(attributes.failure);
    add('activity-failed', `${what.activityType}: ${failure}`, { ...what, failure });
  } else if (event.activityTaskTimedOutEventAttributes) {
    const attributes = event.activityTaskTimedOutEventAttributes;
    const what = activity(attributes.scheduledEventId);
    const failure = failureText(attributes.failure);
    add('activity-timed-out', `${what.activityType}: ${failure}`, { ...what, failure });
  } else if (event.activityTaskCancelRequestedEventAttributes) {
    const what = activity(event.activityTaskCancelRequestedEventAttributes.scheduledEventId);
    add('activity-cancel-requested', what.activityType, what);
  } else if (event.activityTaskCanceledEventAttributes) {
    const what = activity(event.activityTaskCanceledEventAttributes.scheduledEventId);
    add('activity-canceled', what.activityType, what);
  } else {
    return false;
  }
  return true;
}

/** The workflow's own events (start, signals, search attributes, its end); others are left out. */
function addWorkflowEvent(event: HistoryEvent, workflowType: string, result: unknown, add: AddEvent): void {
  if (event.workflowExecutionStartedEventAttributes) {
    add('workflow-started', workflowType);
  } else if (event.workflowExecutionSignaledEventAttributes) {
    const attributes = event.workflowExecutionSignaledEventAttributes;
    const signal = attributes.signalName ?? '?';
    add('signal', signalText(signal, attributes.input?.payloads?.[0]), { signal });
  } else if (event.upsertWorkflowSearchAttributesEventAttributes) {
    const fields = event.upsertWorkflowSearchAttributesEventAttributes.searchAttributes?.indexedFields;
    add('search-attributes', attributesText(fields as Record<string, Payload> | undefined));
  } else if (event.workflowExecutionCompletedEventAttributes) {
    add('workflow-completed', resultText(workflowType, result));
  } else if (event.workflowExecutionFailedEventAttributes) {
    const failure = failureText(event.workflowExecutionFailedEventAttributes.failure);
    add('workflow-failed', failure, { failure });
  } else if (event.workflowExecutionTerminatedEventAttributes) {
    add('workflow-terminated', event.workflowExecutionTerminatedEventAttributes.reason || 'no reason given');
  } else if (event.workflowExecutionCanceledEventAttributes) {
    add('workflow-canceled', '');
  } else if (event.workflowExecutionTimedOutEventAttributes) {
    add('workflow-timed-out', '');
  } else if (event.workflowExecutionContinuedAsNewEventAttributes) {
    add('workflow-continued-as-new', '');
  }
}

/** A failure and its causes, outermost first, without repeating a message. */
export function failureText(failure: Failure | null | undefined): string {
  const messages: string[] = [];
  for (let current = failure, depth = 0; current && depth < 4; current = current.cause, depth++) {
    const message = current.message || current.timeoutFailureInfo?.timeoutType?.toString() || '';
    if (message && !messages.includes(message)) messages.push(message);
  }
  return messages.join(': ') || 'unknown failure';
}

function decode(payload: Payload | null | undefined): unknown {
  if (!payload) return undefined;
  try {
    return defaultPayloadConverter.fromPayload(payload);
  } catch {
    return undefined; // an encoding this client cannot read: shown without a value
  }
}

// Only signals we define are decoded: their payloads are small and carry no secrets.
function signalText(signal: string, payload: Payload | null | undefined): string {
  if (signal !== 'nodeForgotten') return signal;
  const notice = decode(payload) as { nodeId?: string; reason?: string } | undefined;
  return `nodeForgotten: node ${notice?.nodeId ?? '?'} declared gone (${notice?.reason ?? 'no reason'})`;
}

function attributesText(fields: Record<string, Payload> | undefined): string {
  return decodeTypedSearchAttributes(fields)
    .getAll()
    .sort((a, b) => a.key.name.localeCompare(b.key.name))
    .map(({ key, value }) => {
      const name = key.name.replace(/^DurableCsi/, '');
      const shown = value instanceof Date ? value.toISOString() : String(value);
      return `${name.charAt(0).toLowerCase()}${name.slice(1)}=${shown}`;
    })
    .join(' ');
}

function resultText(workflowType: string, result: unknown): string {
  const value = (result ?? {}) as Record<string, unknown>;
  switch (workflowType) {
    case 'deleteVolume':
      return `outcome ${String(value.outcome)}${value.reason ? ` (${String(value.reason)})` : ''}`;
    case 'createVolume':
      return `volume ${String(value.volumeId)} on node ${String(value.nodeId)}, ${formatBytes(Number(value.capacityBytes))}`;
    case 'moveVolume':
      return value.outcome === 'moved'
        ? `moved to ${String(value.newVolumeId)} on node ${String(value.targetNodeId)}: claim ${String(value.claim)} ` +
            `bound to ${String(value.persistentVolume)}, the source deleted`
        : `copied to ${String(value.newVolumeId)} on node ${String(value.targetNodeId)} (the source untouched)`;
    case 'moveSnapshot':
      return value.outcome === 'moved'
        ? `moved to ${String(value.newSnapshotId)} on node ${String(value.targetNodeId)}: VolumeSnapshot ` +
            `${String(value.volumeSnapshot)} bound to ${String(value.content)}, the source deleted`
        : `copied to ${String(value.newSnapshotId)} on node ${String(value.targetNodeId)} (the source untouched)`;
    case 'expandVolume':
      return `capacity ${formatBytes(Number(value.capacityBytes))}${value.nodeExpansionRequired ? ', node expansion required' : ''}`;
    default:
      return JSON.stringify(result ?? null);
  }
}
