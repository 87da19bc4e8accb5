import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { status } from '@grpc/grpc-js';
import { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { connectTemporal } from '../../temporal/connection';
import { toGrpcStatus } from '../../csi/errors';
import { startDevServer, type DevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';

/**
 * A real frontend rate limit, as a busy cluster answers it: a dev server of its own limited to four requests a second
 * per namespace, reached through the native connection the controller and agents use (its own retries included).
 */
describe('Temporal throttling a burst of starts', () => {
  let server: DevServer;
  let connection: NativeConnection;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-throttled-'));

  beforeAll(async () => {
    server = await startDevServer({
      dataDir,
      port: await findFreePort(),
      headless: true,
      cli: process.env.TEMPORAL_CLI,
      dynamicConfig: { 'frontend.namespaceRPS': 4, 'frontend.namespaceBurstRatio': 1 },
    });
    connection = await connectTemporal({ address: server.address, namespace: 'default' });
  }, 90_000);
  afterAll(async () => {
    await connection?.close();
    await server?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers UNAVAILABLE saying Temporal throttled, never RESOURCE_EXHAUSTED (reschedule) or INTERNAL (final)', async () => {
    const client = new Client({ connection, namespace: 'default' });
    const starts = Array.from({ length: 80 }, (_, index) =>
      client.workflow.start('createVolume', { taskQueue: 'throttled', workflowId: `throttled-${index}` }),
    );
    const refused = (await Promise.allSettled(starts)).flatMap((result) =>
      result.status === 'rejected' ? [result.reason as unknown] : [],
    );
    expect(refused.length).toBeGreaterThan(0);
    for (const error of refused) {
      expect(toGrpcStatus(error)).toEqual({
        code: status.UNAVAILABLE,
        message: expect.stringMatching(/^Temporal throttled the request \(RESOURCE_EXHAUSTED: .*rate limit/),
        unexpected: false,
      });
    }
  }, 120_000);
});
