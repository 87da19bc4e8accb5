import { Client, Connection } from '@temporalio/client';
import { InterceptingCall, type Interceptor } from '@grpc/grpc-js';
import { randomUUID } from 'node:crypto';
import { boundedResult } from '../../operations/bounded-result';
import { testTemporalConfig } from '../support/test-temporal';
import { connectionOptions } from '../../common/temporal-config';

/**
 * The controller's bounded wait for a workflow that does not finish in time: one result poll, not a poll spinning
 * through the frontend's long-poll tail room (which answered a poll with under a second left at once).
 */
describe('boundedResult', () => {
  let connection: Connection;
  let client: Client;
  const polls: string[] = [];

  beforeAll(async () => {
    const countPolls: Interceptor = (options, next) => {
      if (options.method_definition.path.endsWith('/GetWorkflowExecutionHistory'))
        polls.push(options.method_definition.path);
      return new InterceptingCall(next(options));
    };
    connection = await Connection.connect({ ...connectionOptions(testTemporalConfig()), interceptors: [countPolls] });
    client = new Client({ connection, namespace: testTemporalConfig().namespace });
  });
  afterAll(async () => connection.close());

  it('waits its time with one poll and answers not done', async () => {
    // No worker polls this queue: the workflow never finishes.
    const handle = await client.workflow.start('neverRuns', {
      workflowId: `bounded-result-${randomUUID()}`,
      taskQueue: `nobody-polls-${randomUUID()}`,
      workflowExecutionTimeout: '1m',
    });
    try {
      polls.length = 0;
      const started = Date.now();
      const outcome = await boundedResult(client, handle, 800);
      const tookMs = Date.now() - started;
      expect(outcome).toEqual({ done: false });
      expect(tookMs).toBeGreaterThanOrEqual(790);
      expect(tookMs).toBeLessThan(3_000);
      expect(polls.length).toBeLessThanOrEqual(2);
    } finally {
      await handle.terminate('test over');
    }
  });
});
