import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { Client, Connection } from '@temporalio/client';
import { missingSearchAttributes } from '../../../temporal/check-search-attributes';
import { startDevServer } from '../../../temporal-dev/dev-server';
import type { DevServer } from '../../../temporal-dev/dev-server';
import { findFreePort } from '../../../temporal-dev/free-port';
import { locateTemporalCli } from '../../../temporal-dev/locate-cli';

// Real `temporal server start-dev`: checks readiness, search attributes and that a restart on the
// same dataDir keeps workflows (SQLite persistence).
describe('startDevServer', () => {
  let dataDir: string;
  let server: DevServer | undefined;

  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-dev-server-'));
  });

  afterAll(async () => {
    await server?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function withClient<T>(address: string, namespace: string, fn: (client: Client) => Promise<T>): Promise<T> {
    const connection = await Connection.connect({ address });
    try {
      return await fn(new Client({ connection, namespace }));
    } finally {
      await connection.close();
    }
  }

  it('serves, registers search attributes, and keeps workflows across a restart', async () => {
    const cli = await locateTemporalCli({ install: false });
    const options = { dataDir, port: await findFreePort(), headless: true, namespace: 'durable-csi-test', cli };

    server = await startDevServer(options);
    expect(server.address).toBe(`127.0.0.1:${options.port}`);
    expect(server.uiUrl).toBeUndefined();
    await withClient(server.address, options.namespace, async (client) => {
      await client.connection.workflowService.getSystemInfo({});
      const ns = await client.connection.workflowService.describeNamespace({ namespace: options.namespace });
      expect(ns.namespaceInfo?.name).toBe(options.namespace);
      expect(await missingSearchAttributes(client.connection, options.namespace)).toEqual([]);
      // No worker polls 'nobody', so the workflow stays RUNNING.
      await client.workflow.start('nonexistent', { workflowId: 'persist-check', taskQueue: 'nobody', args: [] });
    });

    await server.stop();
    await server.stop(); // idempotent
    expect(() => process.kill(server?.pid ?? 0, 0)).toThrow();

    const metricsPort = await findFreePort();
    server = await startDevServer({ ...options, metricsPort });
    await withClient(server.address, options.namespace, async (client) => {
      const description = await client.workflow.getHandle('persist-check').describe();
      expect(description.status.name).toBe('RUNNING');
    });
    expect(server.metricsUrl).toBe(`http://127.0.0.1:${metricsPort}/metrics`);
    const metrics = await (await fetch(server.metricsUrl ?? '')).text();
    expect(metrics).toMatch(/^service_requests\{.*operation="DescribeWorkflowExecution".*service_name="frontend"/m);
    const log = fs.readFileSync(path.join(dataDir, 'temporal.log'), 'utf8');
    expect(log).toContain('--sqlite-pragma journal_mode=wal');
    expect(log).toContain('--dynamic-config-value history.transferProcessorMaxPollRPS=1000');
  });

  it('refuses a port that is already in use', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      await expect(startDevServer({ dataDir, port, headless: true, cli: 'unused' })).rejects.toThrow(
        `127.0.0.1:${port} is already in use`,
      );
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it('reports the exit and the log tail when the CLI exits early', async () => {
    const fakeCli = path.join(dataDir, 'fake-temporal');
    fs.writeFileSync(fakeCli, '#!/bin/sh\necho "Error: something broke" >&2\nexit 3\n', { mode: 0o755 });
    const logFile = path.join(dataDir, 'fake.log');
    const port = await findFreePort();
    await expect(startDevServer({ dataDir, port, headless: true, cli: fakeCli, logFile })).rejects.toThrow(
      /did not become ready: the process exited with code 3[\s\S]*Last lines of .*fake\.log:[\s\S]*something broke/,
    );
  });
});
