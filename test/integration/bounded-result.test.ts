import { InterceptingCall, type Interceptor } from '@grpc/grpc-js';
import { Client, Connection, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { randomUUID } from 'node:crypto';
import { connectionOptions } from '../../temporal/config';
import { boundedResult } from '../../operations/start-or-attach';
import { testTemporalConfig } from '../support/test-temporal';

/**
 * The controller's bounded wait for a workflow that does not finish in time: one result poll that ends when the
 * wait does, not a poll spinning through the frontend's long-poll tail room (which answers a poll with under a
 * second left at once: the SDK's own loop made 392 polls in an 800 ms wait).
 */
describe('boundedResult', () => {
  const WAIT_MS = 800;
  let grpcConnection: Connection;
  let nativeConnection: NativeConnection;
  const polls: string[] = [];

  beforeAll(async () => {
    const countPolls: Interceptor = (options, next) => {
      if (options.method_definition.path.endsWith('/GetWorkflowExecutionHistory'))
        polls.push(options.method_definition.path);
      return new InterceptingCall(next(options));
    };
    const options = connectionOptions(testTemporalConfig());
    grpcConnection = await Connection.connect({ ...options, interceptors: [countPolls] });
    nativeConnection = await NativeConnection.connect(options);
  });
  afterAll(async () => {
    await grpcConnection.close();
    await nativeConnection.close();
  });

  /** A workflow nobody runs: no worker polls its queue. */
  async function neverFinishing(client: Client): Promise<WorkflowHandle> {
    return client.workflow.start('neverRuns', {
      workflowId: `bounded-result-${randomUUID()}`,
      taskQueue: `nobody-polls-${randomUUID()}`,
      workflowExecutionTimeout: '1m',
    });
  }

  async function timedWait(client: Client, handle: WorkflowHandle) {
    const started = Date.now();
    const outcome = await boundedResult(client, handle, WAIT_MS);
    return { outcome, tookMs: Date.now() - started };
  }

  it('waits its time with one poll and answers not done', async () => {
    const client = new Client({ connection: grpcConnection, namespace: testTemporalConfig().namespace });
    const handle = await neverFinishing(client);
    try {
      polls.length = 0;
      const { outcome, tookMs } = await timedWait(client, handle);
      expect(outcome).toEqual({ done: false });
      expect(tookMs).toBeGreaterThanOrEqual(WAIT_MS - 50);
      expect(tookMs).toBeLessThan(WAIT_MS + 700);
      expect(polls).toHaveLength(1);
    } finally {
      await handle.terminate('test over');
    }
  });

  it('ends on time over the native connection the controller uses', async () => {
    const client = new Client({ connection: nativeConnection, namespace: testTemporalConfig().namespace });
    const handle = await neverFinishing(client);
    try {
      const { outcome, tookMs } = await timedWait(client, handle);
      expect(outcome).toEqual({ done: false });
      expect(tookMs).toBeGreaterThanOrEqual(WAIT_MS - 50);
      expect(tookMs).toBeLessThan(WAIT_MS + 700);
    } finally {
      await handle.terminate('test over');
    }
  });

  it('throws as handle.result() does for a run that ended without a result', async () => {
    const client = new Client({ connection: nativeConnection, namespace: testTemporalConfig().namespace });
    const handle = await neverFinishing(client);
    await handle.terminate('ended by the test');
    await expect(boundedResult(client, handle, WAIT_MS)).rejects.toBeInstanceOf(WorkflowFailedError);
  });
});
