import fs from 'node:fs';
import path from 'node:path';
import { DEV_NODE_FLAGS } from '../../agent/dev-node-flags';
import { call, withDeadline } from '../../csi/client';
import type { ProbeResponse__Output } from '../../csi/generated/csi/v1/ProbeResponse';
import { TestCluster } from '../support/cluster';
import { createRequest, createVolume } from '../support/csi-requests';
import { runCli } from '../support/run-cli';
import { eventually } from '../support/eventually';

/**
 * issue 21 items 1, 3 and 4, through the real CLI: a start that would talk plaintext to a non-loopback Temporal,
 * or serve the Node service on a non-loopback TCP address, is refused at once with the flag to change, and leaves
 * nothing on disk; an environment variable (what a ConfigMap can set) no longer arms failpoints.
 */
describe('refused at start', () => {
  const cluster = new TestCluster('security');
  afterAll(() => cluster.teardown());
  // TEST-NET-3, and never tried from this host's network: the refusals come before any connect, and the agents
  // that do try it run in a network namespace of their own (startNode's ownNetwork).
  const REMOTE = '203.0.113.7:7233';

  const nodeArgs = (name: string, endpoint = `unix://${path.join(cluster.root, `${name}.sock`)}`) => [
    'node',
    '--endpoint',
    endpoint,
    '--node-id',
    name,
    '--driver-name',
    cluster.driverName,
    '--pool',
    cluster.pool(name),
    ...DEV_NODE_FLAGS,
  ];

  it.each([
    ['node', nodeArgs('plain-node')],
    ['controller', ['controller', '--endpoint', `unix://${path.join(cluster.root, 'plain-ctl.sock')}`]],
    ['volumes stuck', ['volumes', 'stuck']],
    ['nodes', ['nodes', 'list']],
  ])('durable-csi %s: plaintext to a non-loopback Temporal, naming the address and the flag', async (_, args) => {
    const before = fs.readdirSync(cluster.root);
    const started = Date.now();
    const result = await runCli([...args, '--temporal-address', REMOTE], { timeoutMs: 20_000 });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`Temporal at ${REMOTE} would be reached in plaintext`);
    expect(result.stderr).toContain('--temporal-insecure');
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(fs.readdirSync(cluster.root)).toEqual(before);
  });

  it('durable-csi node: a TCP endpoint on a non-loopback address', async () => {
    const before = fs.readdirSync(cluster.root);
    const result = await runCli([...nodeArgs('tcp-node', 'tcp://0.0.0.0:47999'), '--temporal-address', '127.0.0.1:1']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('--endpoint tcp://0.0.0.0:47999 would serve the Node service beyond this host');
    expect(fs.readdirSync(cluster.root)).toEqual(before);
  });

  it('--temporal-insecure (or TEMPORAL_INSECURE=true) lets the node agent start and try that address', async () => {
    for (const [name, extra, env] of [
      ['insecure-flag', ['--temporal-insecure'], {}],
      ['insecure-env', [], { TEMPORAL_INSECURE: 'true' }],
    ] as const) {
      const node = await cluster.startNode(name, {
        temporalAddress: REMOTE,
        extra: [...extra],
        env,
        waitReady: false,
        ownNetwork: true,
      });
      const clients = cluster.csi(node.endpoint);
      // It serves kubelet whatever Temporal's state, unready until it reaches Temporal.
      const probe = await eventually(
        `${name} answering Probe`,
        () =>
          call<ProbeResponse__Output>((done) => clients.identity.Probe({}, withDeadline(2000), done)).catch(
            () => undefined,
          ),
        30_000,
      );
      expect(probe.ready?.value).toBe(false);
      expect(node.child.exitCode).toBeNull();
      // It tried the address, failed and stays up retrying (the namespace has no route: the failure is at once).
      await eventually(
        `${name} retrying ${REMOTE}`,
        () => {
          const lines = fs.readFileSync(cluster.log(name), 'utf8').split('\n').filter(Boolean);
          const parsed = lines.map((line) => JSON.parse(line) as { msg?: string; temporal?: string });
          return (
            parsed.some((line) => line.msg === 'connecting to Temporal' && line.temporal === REMOTE) &&
            parsed.some((line) => line.msg?.startsWith('Temporal: ') && line.msg.includes('retrying in'))
          );
        },
        30_000,
      );
      expect(node.child.exitCode).toBeNull();
      await node.stop();
    }
  });
});

describe('failpoints', () => {
  const cluster = new TestCluster('security-failpoints');
  afterAll(() => cluster.teardown());

  it('are not armed by DURABLE_CSI_FAILPOINTS in the environment', async () => {
    const node = await cluster.startNode('node-1', { env: { DURABLE_CSI_FAILPOINTS: 'create.after-allocate' } });
    const clients = cluster.csi((await cluster.startController()).endpoint);
    const answer = await createVolume(clients, createRequest('pvc-env-failpoint'), 30_000);
    expect(answer.volume?.volume_id).toMatch(/^v1_node-1_/);
    expect(node.child.exitCode).toBeNull();
    expect(node.child.signalCode).toBeNull();
    expect(cluster.volumesOnDisk('node-1')).toHaveLength(1);
  });
});
