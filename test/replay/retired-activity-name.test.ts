import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Worker } from '@temporalio/worker';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createControlActivities } from '../../activities/control-activities';
import { connectionOptions } from '../../temporal/config';
import { REPORTED_NODES_PATCH } from '../../workflows/reported-nodes';
import { testTemporalConfig } from '../support/test-temporal';

const EventType = temporal.api.enums.v1.EventType;
type History = temporal.api.history.v1.IHistory;

function scheduledActivityTypes(history: History): string[] {
  return (history.events ?? [])
    .filter((event) => event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    .map((event) => event.activityTaskScheduledEventAttributes?.activityType?.name ?? '');
}

/** What each patch marker carries, as text (the patch ID is among it). */
function patchMarkers(history: History): string[] {
  return (history.events ?? [])
    .filter((event) => event.markerRecordedEventAttributes?.markerName === 'core_patch')
    .map((event) =>
      Object.values(event.markerRecordedEventAttributes?.details ?? {})
        .flatMap((payloads) => payloads.payloads ?? [])
        .map((payload) => Buffer.from(payload.data ?? []).toString('utf8'))
        .join(' '),
    );
}

/**
 * The read of every reported node was the activity `readRegistry`, a name from the retired registry; it is now
 * `listReportedNodes` behind patched('list-reported-nodes-activity'). A run under this code schedules the new name
 * and replays; the histories of release 0.1 schedule the old one and replay too (the old name stays registered).
 */
describe('the readRegistry activity, renamed listReportedNodes', () => {
  let connection: Connection;
  let native: NativeConnection;
  let workflowBundle: { code: string };

  beforeAll(async () => {
    const options = connectionOptions(testTemporalConfig());
    [connection, native] = await Promise.all([Connection.connect(options), NativeConnection.connect(options)]);
    workflowBundle = await bundleWorkflowCode({
      workflowsPath: require.resolve('../../workflows'),
      logger: new DefaultLogger('WARN'),
    });
  });
  afterAll(async () => {
    await connection?.close();
    await native?.close();
  });

  it('a new list run schedules listReportedNodes, records the patch, and replays', async () => {
    const client = new Client({ connection, namespace: testTemporalConfig().namespace });
    const driverName = `rename-${randomUUID().slice(0, 8)}.durable-csi.io`;
    const taskQueue = `rename-${randomUUID()}`;
    const worker = await Worker.create({
      connection: native,
      namespace: testTemporalConfig().namespace,
      taskQueue,
      workflowBundle,
      activities: createControlActivities({ client, driverName }),
    });
    const workflowId = `${driverName}/list/${randomUUID()}`;
    const result = await worker.runUntil(
      client.workflow.execute('listVolumes', { workflowId, taskQueue, args: [{ driverName }] }),
    );
    expect(result).toEqual({ volumes: [], unreachableNodes: [], answeredNodes: [] });
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    expect(scheduledActivityTypes(history)).toEqual(['listReportedNodes']);
    const markers = patchMarkers(history);
    expect(markers).toHaveLength(1);
    expect(markers[0]).toContain(REPORTED_NODES_PATCH);
    await Worker.runReplayHistory({ workflowBundle }, history, workflowId);
  });

  it.each(['release-0.1/create-volume', 'release-0.1/delete-volume'])(
    '%s still schedules readRegistry and replays',
    async (name) => {
      const file = path.join(__dirname, '..', 'fixtures', 'histories', `${name}.pb`);
      const history = temporal.api.history.v1.History.decode(fs.readFileSync(file));
      expect(scheduledActivityTypes(history)).toContain('readRegistry');
      await Worker.runReplayHistory({ workflowBundle }, history, name);
    },
  );
});
