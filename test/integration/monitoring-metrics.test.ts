import { Registry } from 'prom-client';
import { registerOrphanMetrics } from '../../kubernetes/orphan-metrics';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster, temporalAddress } from '../support/cluster';
import { MiB, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { TcpForwarder } from '../support/tcp-forwarder';
import { dashboardQueries, metricNames, ruleQueries } from '../unit/deploy/promql-names';

/**
 * issue 36 item 2: the shipped dashboard and alert rules read only metrics a real controller and node agent export
 * (read from their live /metrics endpoints, not from the sources), the histogram has the code the dashboard splits
 * latency by, and a controller whose Temporal is gone still answers its scrape: with durable_csi_temporal_up 0 (what
 * DurableCsiTemporalUnreachable fires on) and its call counters, instead of a 500 for the whole page.
 */
jest.setTimeout(120_000);

const cluster = new TestCluster('monitoring');
let forwarder: TcpForwarder | undefined;
let temporalPort: number;
let controllerMetrics: string;
let nodeMetrics: string;
let controllerEndpoint: string;

beforeAll(async () => {
  temporalPort = await findFreePort();
  forwarder = await TcpForwarder.start(temporalPort, temporalAddress());
  controllerMetrics = `127.0.0.1:${await findFreePort()}`;
  nodeMetrics = `127.0.0.1:${await findFreePort()}`;
  await cluster.startNode('node-1', { extra: ['--metrics-address', nodeMetrics] });
  ({ endpoint: controllerEndpoint } = await cluster.startController('controller', [
    '--temporal-address',
    `127.0.0.1:${temporalPort}`,
    '--metrics-address',
    controllerMetrics,
  ]));
});
afterAll(async () => {
  await forwarder?.close();
  await cluster.teardown();
});

async function scrape(address: string): Promise<{ status: number; text: string }> {
  const response = await fetch(`http://${address}/metrics`);
  return { status: response.status, text: await response.text() };
}

/** Every series name a page declares (`# TYPE`), histograms with their _bucket, _sum and _count. */
function exported(page: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of page.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name!);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
  }
  return names;
}

/** A sample's value, by metric name and labels (a subset). */
function sample(page: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const [, series, value] of page.matchAll(/^(\S+?(?:\{[^}]*\})?) (\S+)$/gm)) {
    if (series !== name && !series!.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([key, wanted]) => series!.includes(`${key}="${wanted}"`))) return Number(value);
  }
  return undefined;
}

it('every metric the dashboard and the alert rules read is exported by a live controller or node agent', async () => {
  const clients = cluster.csi(controllerEndpoint);
  const answer = await retryLikeCo(() =>
    createVolume(clients, createRequest('pvc-metrics', 64 * MiB, onNode('node-1'))),
  );
  await retryLikeCo(() => deleteVolume(clients, answer.volume!.volume_id));

  const [controller, node] = await Promise.all([scrape(controllerMetrics), scrape(nodeMetrics)]);
  expect(controller.status).toBe(200);
  expect(node.status).toBe(200);
  // The orphan gauge needs --kubernetes (an API server; test/e2e-k8s reads it live): its name from its registration.
  const orphans = new Registry();
  registerOrphanMetrics(orphans, {} as Parameters<typeof registerOrphanMetrics>[1]);
  const names = new Set([
    ...exported(controller.text),
    ...exported(node.text),
    ...orphans.getMetricsAsArray().map((metric) => metric.name),
  ]);

  const read = [...dashboardQueries(), ...ruleQueries()].flatMap((query) =>
    metricNames(query).map((name) => ({ name, query })),
  );
  expect(read.length).toBeGreaterThan(10);
  const missing = read.filter(({ name }) => !names.has(name) && !name.startsWith('durable_csi:'));
  expect(missing).toEqual([]);

  // The dashboard splits call latency by method and code; the per-node liveness and Temporal gauges exist.
  expect(
    sample(controller.text, 'durable_csi_csi_call_duration_seconds_count', { method: 'CreateVolume', code: 'OK' }),
  ).toBeGreaterThan(0);
  expect(sample(controller.text, 'durable_csi_node_live', { node: 'node-1' })).toBe(1);
  expect(sample(controller.text, 'durable_csi_temporal_up')).toBe(1);
});

it('a controller whose Temporal is unreachable still answers its scrape, with durable_csi_temporal_up 0', async () => {
  await forwarder?.close();
  forwarder = undefined;
  let page = await scrape(controllerMetrics);
  const deadline = Date.now() + 30_000;
  while (sample(page.text, 'durable_csi_temporal_up') !== 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    page = await scrape(controllerMetrics);
  }
  expect(page.status).toBe(200);
  expect(sample(page.text, 'durable_csi_temporal_up')).toBe(0);
  // What the replica cannot read now it does not export (never a made-up zero); its own counters it still does.
  expect(sample(page.text, 'durable_csi_nodes', { state: 'live' })).toBeUndefined();
  expect(sample(page.text, 'durable_csi_csi_calls_total', { method: 'CreateVolume', code: 'OK' })).toBeGreaterThan(0);

  forwarder = await TcpForwarder.start(temporalPort, temporalAddress());
  const back = Date.now() + 60_000;
  while (sample(page.text, 'durable_csi_temporal_up') !== 1 && Date.now() < back) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    page = await scrape(controllerMetrics);
  }
  expect(sample(page.text, 'durable_csi_temporal_up')).toBe(1);
});
