import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startDevServer, type DevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster } from '../support/cluster';
import { codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(__dirname, '..', '..', 'test-artifacts');

/**
 * A stuck deletion as an operator finds it: in the Temporal Web UI filtered by the node search attribute,
 * and in the controller's metrics. Runs its own dev server because the shared one is headless.
 */
describe('a deletion waiting for a dead node, seen by an operator', () => {
  let server: DevServer;
  let cluster: TestCluster;
  let browser: Browser | undefined;
  let metricsPort: number;
  let dataDir: string | undefined;
  const sharedAddress = process.env.DURABLE_CSI_TEST_TEMPORAL;

  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium (.ci/run does)`);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-ui-'));
    server = await startDevServer({ dataDir, port: await findFreePort(), uiPort: await findFreePort() });
    process.env.DURABLE_CSI_TEST_TEMPORAL = server.address;
    cluster = new TestCluster('ui');
    metricsPort = await findFreePort();
  });

  afterAll(async () => {
    await browser?.close();
    await cluster?.teardown();
    await server?.stop();
    process.env.DURABLE_CSI_TEST_TEMPORAL = sharedAddress;
    // The server's database (a few MB): left in /tmp by every run before.
    if (dataDir && !process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows in the UI filter with its summary, and in the metrics with node and age', async () => {
    const node = await cluster.startNode('node-3');
    const controller = await cluster.startController('controller', ['--metrics-address', `127.0.0.1:${metricsPort}`]);
    const clients = cluster.csi(controller.endpoint);
    const created = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-1234', undefined, onNode('node-3'))),
    );
    const volumeId = created.volume!.volume_id;
    await node.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 32_000)); // past the liveness window: node judged offline
    expect(await codeOf(deleteVolume(clients, volumeId, 4000))).toBe('ABORTED');

    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(
      /durable_csi_pending_operations\{node="node-3",operation="delete",phase="waiting-for-node",component="controller"\} 1/,
    );
    const age = /durable_csi_oldest_pending_operation_seconds\{node="node-3",component="controller"\} ([\d.]+)/.exec(
      metrics,
    );
    expect(Number(age?.[1])).toBeGreaterThan(0);
    expect(metrics).toMatch(/durable_csi_nodes\{state="live",component="controller"\} 0/);
    expect(metrics).toMatch(
      /durable_csi_csi_calls_total\{method="DeleteVolume",code="ABORTED",component="controller"\} 1/,
    );

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking'],
    });
    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    const query = encodeURIComponent('DurableCsiNodeId="node-3" AND ExecutionStatus="Running"');
    await page.goto(`${server.uiUrl}/namespaces/default/workflows?query=${query}`);
    const workflowId = `${cluster.driverName}/delete/${volumeId}`;
    await page.getByText(workflowId).first().waitFor({ timeout: 30_000 });
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'ui-stuck-deletions.png'), fullPage: true });

    await page.getByText(workflowId).first().click();
    // The timeline names the waiting activity and the node whose pool it works on.
    await page
      .getByText(/deleteVolumeOnNode • delete volume \w+ from the pool of node-3/)
      .first()
      .waitFor();
    await page.getByText('User Metadata').first().click();
    // The UI renders user metadata (markdown) inside sandboxed iframes.
    await waitForTextInFrames(
      page,
      new RegExp(`delete ${volumeId} on node node-3: waiting for the node since \\d\\d:\\d\\d`),
    );
    await waitForTextInFrames(page, /deletion waits for node node-3 \(offline\) since [\d-]+T[\d:.]+Z/);
    await waitForTextInFrames(page, /Node: node-3, offline, last heartbeat [\d-]+T/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'ui-stuck-deletion-detail.png'), fullPage: true });
  });
});

async function waitForTextInFrames(page: Page, pattern: RegExp, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    for (const frame of page.frames()) {
      const text = await frame
        .locator('body')
        .innerText({ timeout: 1000 })
        .catch(() => '');
      if (pattern.test(text)) return;
    }
    if (Date.now() > until) throw new Error(`no frame of ${page.url()} shows ${pattern}`);
    await page.waitForTimeout(500);
  }
}
