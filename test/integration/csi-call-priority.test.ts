import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { startOrAttach } from '../../operations/start-or-attach';
import { startDevServer, type DevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';

/**
 * A CSI call's workflow is dispatched ahead of a backlog of node record tasks on the queue they share (the stall of
 * docs/scale.md's 5,000-node rolling restart). Against the real server, with no worker: the backlog is made first,
 * the call's workflow last, and the first workflow task a poll receives must be the call's. Without the call's
 * priority (or on a server that matched first in, first out) it would be an older record's.
 *
 * Its own dev server, with one partition per task queue (docs/scale.md's sizing guide recommends it): a server orders
 * each partition's backlog, and polls are spread over the partitions, so with several a poll may find only records
 * in its own, and a test on the shared server would pass or fail by which partition its poll reached.
 */
describe('a CSI call on a queue backlogged with node record tasks', () => {
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-priority-'));
  let server: DevServer | undefined;
  let connection: Connection | undefined;
  const taskQueue = `priority-${randomUUID()}`;

  beforeAll(async () => {
    server = await startDevServer({
      dataDir: path.join(workDir, 'temporal'),
      port: await findFreePort(),
      headless: true,
      extraArgs: [
        '--dynamic-config-value',
        'matching.numTaskqueueReadPartitions=1',
        '--dynamic-config-value',
        'matching.numTaskqueueWritePartitions=1',
      ],
    });
    connection = await Connection.connect({ address: server.address });
  }, 60_000);
  afterAll(async () => {
    await connection?.close();
    await server?.stop();
    fs.rmSync(workDir, { recursive: true, force: true });
  });

  it('is handed to the next poll before the records queued earlier', async () => {
    const client = new Client({ connection: connection! });
    for (let index = 0; index < 20; index++) {
      // As agent/presence.ts starts a record: the queue's default priority.
      await client.workflow.start('nodePresence', {
        workflowId: `record-${index}`,
        taskQueue,
        args: [{ driverName: 'priority.test', nodeId: `node-${index}` }],
      });
    }
    await startOrAttach(client, 'createVolume', { workflowId: 'call', taskQueue, args: [] as never });
    // A started workflow's first task reaches matching later, from history's transfer queue: under load (CI's
    // parallel phase) a poll made at once found the records alone. Poll only once matching holds all 21.
    await backlogged(client, 21);

    // A long poll needs a deadline; the backlog answers it at once.
    const polled = await connection!.withDeadline(Date.now() + 20_000, () =>
      connection!.workflowService.pollWorkflowTaskQueue({
        namespace: client.options.namespace,
        taskQueue: { name: taskQueue },
        identity: 'csi-call-priority.test',
      }),
    );
    expect(polled.workflowExecution?.workflowId).toBe('call');
  });

  /** Waits until matching reports `count` workflow tasks in the queue's backlog, whatever their priority. */
  async function backlogged(client: Client, count: number): Promise<void> {
    const deadline = Date.now() + 30_000;
    let seen = 0;
    while (Date.now() < deadline) {
      const { stats } = await connection!.workflowService.describeTaskQueue({
        namespace: client.options.namespace,
        taskQueue: { name: taskQueue },
        taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        reportStats: true,
      });
      seen = Number(stats?.approximateBacklogCount ?? 0);
      if (seen >= count) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`matching never held ${count} workflow tasks; its backlog: ${seen}`);
  }
});
