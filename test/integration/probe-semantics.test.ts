import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnCli, stopChild } from '../../agent/spawn-cli';
import { waitUntilReady } from '../../agent/wait-ready';
import { connectCsi } from '../../csi/client';
import { startDevServer, type DevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';
import { probe } from '../support/cluster';
import { eventually } from '../support/eventually';

/**
 * A Temporal outage must not make livenessprobe restart the driver: CSI Probe (liveness) stays ready, and the
 * controller's /readyz (readiness) says Temporal does not answer, then recovers with it. Its own Temporal server,
 * since this test stops it.
 */
jest.setTimeout(180_000);

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-probe-'));
let temporal: DevServer | undefined;

afterAll(async () => {
  await temporal?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

async function readyz(port: number): Promise<number> {
  return (await fetch(`http://127.0.0.1:${port}/readyz`)).status;
}

it('Probe is liveness (stays ready while Temporal is down); /readyz is readiness (503, then 200 again)', async () => {
  const port = await findFreePort();
  const dataDir = path.join(root, 'temporal');
  temporal = await startDevServer({ dataDir, port, headless: true });
  const metricsPort = await findFreePort();
  const endpoint = `unix://${path.join(root, 'controller.sock')}`;
  const controller = spawnCli(
    [
      'controller',
      '--endpoint',
      endpoint,
      '--driver-name',
      'probe.test.durable-csi.io',
      '--temporal-address',
      temporal.address,
      '--metrics-address',
      `127.0.0.1:${metricsPort}`,
    ],
    path.join(root, 'controller.log'),
  );
  const clients = connectCsi(endpoint);
  try {
    await waitUntilReady(endpoint, 60_000);
    expect(await readyz(metricsPort)).toBe(200);

    await temporal.stop();
    await eventually('/readyz 503', async () => (await readyz(metricsPort)) === 503);
    expect(await (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).text()).toMatch(/does not answer/);
    // Liveness for longer than livenessprobe's failure budget in deploy/ would be (5 x 10 s is the real one).
    for (let i = 0; i < 10; i++) {
      expect(await probe(clients, 5000)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    expect(controller.exitCode).toBeNull();

    temporal = await startDevServer({ dataDir, port, headless: true });
    await eventually('/readyz 200 again', async () => (await readyz(metricsPort)) === 200);
    expect(await probe(clients, 5000)).toBe(true);
  } finally {
    clients.close();
    await stopChild(controller);
  }
});
