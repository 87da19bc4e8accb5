import { defaultPayloadConverter } from '@temporalio/common';
import { msToTs } from '@temporalio/common/lib/time';
import { nodeTaskQueue } from '../../../common/names';
import { buildTimeline } from '../../../operations/operation-timeline';

type History = Parameters<typeof buildTimeline>[0];

const at = (seconds: number) => msToTs(seconds * 1000);

/** Every kind of event the timeline shows, and one it leaves out (a workflow task). */
const HISTORY = {
  events: [
    { eventId: 1, eventTime: at(1000), workflowExecutionStartedEventAttributes: {} },
    { eventId: 2, eventTime: at(1001), workflowTaskScheduledEventAttributes: {} },
    {
      eventId: 5,
      eventTime: at(1002),
      activityTaskScheduledEventAttributes: {
        activityType: { name: 'createVolumeOnNode' },
        taskQueue: { name: nodeTaskQueue('drv', 'node-1') },
      },
    },
    {
      eventId: 6,
      eventTime: at(1003),
      activityTaskStartedEventAttributes: {
        scheduledEventId: 5,
        attempt: 2,
        identity: 'agent@node-1',
        lastFailure: { message: 'disk busy' },
      },
    },
    {
      eventId: 7,
      eventTime: at(1004),
      activityTaskFailedEventAttributes: {
        scheduledEventId: 5,
        failure: { message: 'boom', cause: { message: 'io' } },
      },
    },
    {
      eventId: 8,
      eventTime: at(1005),
      activityTaskScheduledEventAttributes: { activityType: { name: 'announceLiveness' }, taskQueue: { name: 'ctl' } },
    },
    { eventId: 9, eventTime: at(1006), activityTaskCompletedEventAttributes: { scheduledEventId: 8 } },
    {
      eventId: 10,
      eventTime: at(1007),
      activityTaskTimedOutEventAttributes: { scheduledEventId: 5, failure: { message: 'heartbeat' } },
    },
    { eventId: 11, eventTime: at(1008), activityTaskCancelRequestedEventAttributes: { scheduledEventId: 8 } },
    { eventId: 12, eventTime: at(1009), activityTaskCanceledEventAttributes: { scheduledEventId: 99 } },
    { eventId: 13, eventTime: at(1010), workflowExecutionSignaledEventAttributes: { signalName: 'renewRecord' } },
    { eventId: 14, eventTime: at(1011), workflowExecutionTerminatedEventAttributes: { reason: '' } },
    { eventId: 15, eventTime: at(1012), workflowExecutionFailedEventAttributes: { failure: { message: 'bad' } } },
    { eventId: 16, eventTime: at(1013), workflowExecutionCanceledEventAttributes: {} },
    { eventId: 17, eventTime: at(1014), workflowExecutionTimedOutEventAttributes: {} },
    { eventId: 18, eventTime: at(1015), workflowExecutionContinuedAsNewEventAttributes: {} },
    {
      eventId: 19,
      eventTime: at(1016),
      workflowExecutionCompletedEventAttributes: {
        result: { payloads: [defaultPayloadConverter.toPayload({ volumeId: 'vol-1' })] },
      },
    },
  ],
} as unknown as History;

describe('buildTimeline', () => {
  const timeline = buildTimeline(HISTORY, 'nodePresence', 'drv');

  it('names each event it shows, in order, and leaves workflow tasks out', () => {
    expect(timeline.events.map((event) => [event.event, event.detail])).toEqual([
      ['workflow-started', 'nodePresence'],
      ['activity-scheduled', 'createVolumeOnNode on node node-1'],
      ['activity-started', 'createVolumeOnNode attempt 2 by agent@node-1; last failure: disk busy'],
      ['activity-failed', 'createVolumeOnNode: boom: io'],
      ['activity-scheduled', 'announceLiveness on ctl'],
      ['activity-completed', 'announceLiveness'],
      ['activity-timed-out', 'createVolumeOnNode: heartbeat'],
      ['activity-cancel-requested', 'announceLiveness'],
      ['activity-canceled', '?'],
      ['signal', expect.stringContaining('renewRecord')],
      ['workflow-terminated', 'no reason given'],
      ['workflow-failed', 'bad'],
      ['workflow-canceled', ''],
      ['workflow-timed-out', ''],
      ['workflow-continued-as-new', ''],
      ['workflow-completed', expect.any(String)],
    ]);
  });

  it('carries the activity, its queue, its node, the attempt and the failure as fields', () => {
    expect(timeline.events[2]).toMatchObject({
      activityType: 'createVolumeOnNode',
      taskQueue: nodeTaskQueue('drv', 'node-1'),
      nodeId: 'node-1',
      attempt: 2,
    });
    expect(timeline.events[3]).toMatchObject({ failure: 'boom: io', nodeId: 'node-1' });
    expect(timeline.events[5]).toMatchObject({ activityType: 'announceLiveness', taskQueue: 'ctl', nodeId: undefined });
    expect(timeline.events[8]).toMatchObject({ activityType: '?', taskQueue: '?' });
    expect(timeline.events[9]).toMatchObject({ signal: 'renewRecord' });
    expect(timeline.events[0]?.time).toEqual(new Date(1_000_000));
  });

  it('decodes the completion result', () => {
    expect(timeline.result).toEqual({ volumeId: 'vol-1' });
  });
});
