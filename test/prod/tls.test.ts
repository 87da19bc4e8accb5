import fs from 'node:fs';
import path from 'node:path';
import { spawnCli, stopChild } from '../../agent/spawn-cli';
import { call, connectCsi, withDeadline } from '../../csi/client';
import type { ProbeResponse__Output } from '../../csi/generated/csi/v1/ProbeResponse';
import type { TemporalConfig } from '../../temporal/config';
import { API_KEY_SERVER_NAME, certificatesIn } from '../temporal-prod/certificates';
import { temporalConfigFlags } from '../temporal-prod/prod-temporal';
import { TestCluster } from '../support/cluster';
import { createRequest, createVolume, deleteVolume, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';
import { testTemporalConfig } from '../support/test-temporal';
import { DEV_NODE_FLAGS } from '../../agent/dev-node-flags';

/**
 * mTLS between the driver and the production-style frontend, with certificates the harness made: every README TLS
 * flag, and the startup errors for each way the TLS setup can be wrong. Each error must name the address and the
 * TLS problem (the SDK alone says "Failed to connect before the deadline" for all of them). A controller or CLI
 * stops; a node agent keeps serving kubelet and logs the same error with every retry.
 */
describe('TLS to the Temporal frontend', () => {
  const config = testTemporalConfig();
  const certs = certificatesIn(path.dirname(config.tlsCa ?? ''));
  const cluster = new TestCluster('tls');
  const address = config.address;

  afterAll(() => cluster.teardown());

  /** Runs a driver command that must fail at start; resolves with its exit code and output. */
  const failing = async (name: string, args: string[], tls: Partial<TemporalConfig>) => {
    const log = cluster.log(name);
    const flags = temporalConfigFlags({ address, namespace: config.namespace, ...tls });
    const child = spawnCli([...args, ...flags], log);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
    return { code, output: fs.readFileSync(log, 'utf8') };
  };
  /**
   * Runs a node agent whose Temporal connection cannot work: it serves CSI meanwhile (kubelet needs it) and retries,
   * logging why; resolves once the explanation is logged, with its Probe readiness, then stops it.
   */
  const retrying = async (name: string, args: string[], tls: Partial<TemporalConfig>) => {
    const log = cluster.log(name);
    const flags = temporalConfigFlags({ address, namespace: config.namespace, ...tls });
    const child = spawnCli([...args, ...flags], log);
    try {
      const until = Date.now() + 60_000;
      const read = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '');
      while (!read().includes(prefix) && Date.now() < until && child.exitCode === null)
        await new Promise((resolve) => setTimeout(resolve, 250));
      const clients = connectCsi(`unix://${path.join(cluster.root, `${name}.sock`)}`);
      const ready = await call<ProbeResponse__Output>((done) => clients.identity.Probe({}, withDeadline(3000), done))
        .then((probe) => probe.ready?.value)
        .finally(() => clients.close());
      return { code: child.exitCode, output: read(), alive: child.exitCode === null, ready };
    } finally {
      await stopChild(child);
    }
  };
  const controllerArgs = (name: string) => [
    'controller',
    '--endpoint',
    `unix://${path.join(cluster.root, `${name}.sock`)}`,
    '--driver-name',
    cluster.driverName,
  ];
  const nodeArgs = (name: string) => [
    'node',
    '--endpoint',
    `unix://${path.join(cluster.root, `${name}.sock`)}`,
    '--driver-name',
    cluster.driverName,
    '--node-id',
    name,
    '--pool',
    cluster.pool(name),
    ...DEV_NODE_FLAGS,
  ];
  const prefix = `cannot connect to Temporal at ${address} over TLS: `;
  const tlsServerName = config.tlsServerName;
  const clientPair = { tlsCert: certs.client.cert, tlsKey: certs.client.key };

  // Each refused start waits out the SDK's 10 s connect timeout: they run side by side, and the tests read the results.
  let results: Record<string, Promise<{ code: number | null; output: string; alive?: boolean; ready?: boolean }>> = {};
  beforeAll(() => {
    results = {
      wrongCa: failing('wrong-ca', controllerArgs('wrong-ca'), { tlsCa: certs.otherCa, ...clientPair, tlsServerName }),
      noCert: retrying('no-cert', nodeArgs('no-cert'), { tlsCa: certs.ca, tlsServerName }),
      stranger: failing('stranger', controllerArgs('stranger'), {
        tlsCa: certs.ca,
        tlsCert: certs.strangerClient.cert,
        tlsKey: certs.strangerClient.key,
        tlsServerName,
      }),
      noName: failing('no-name', controllerArgs('no-name'), { tlsCa: certs.ca, ...clientPair }),
      plain: failing('plain', controllerArgs('plain'), {}),
      cliNoCert: failing('cli-no-cert', ['volumes', 'stuck', '--driver-name', cluster.driverName], {
        tlsCa: certs.ca,
        tlsServerName,
      }),
    };
  });
  const result = (name: string) =>
    results[name] as Promise<{ code: number | null; output: string; alive?: boolean; ready?: boolean }>;

  it('a wrong CA stops the controller at start, naming the address, the certificate and the CA file', async () => {
    const { code, output } = await result('wrongCa');
    expect(code).not.toBe(0);
    expect(output).toContain(
      `${prefix}the server's certificate (CN=temporal-frontend, issued by CN=durable-csi test CA) is not signed by ` +
        `the CA in ${certs.otherCa}`,
    );
  });

  it('a missing client certificate keeps the node agent serving CSI, not ready, naming the problem', async () => {
    const { alive, output, ready } = await result('noCert');
    expect(alive).toBe(true);
    expect(ready).toBe(false);
    expect(output).toContain(
      `${prefix}the server requires a client certificate (mTLS): pass --temporal-tls-cert and --temporal-tls-key`,
    );
    expect(cluster.volumesOnDisk('no-cert')).toEqual([]);
  });

  it('a client certificate from a CA the server does not trust is refused, by name', async () => {
    const { code, output } = await result('stranger');
    expect(code).not.toBe(0);
    expect(output).toContain(`${prefix}the server refused the client certificate ${certs.strangerClient.cert}`);
  });

  it('a server name the certificate lacks points at --temporal-tls-server-name', async () => {
    const { code, output } = await result('noName');
    expect(code).not.toBe(0);
    expect(output).toContain(
      `${prefix}the server's certificate is for DNS:${tlsServerName}, not "127.0.0.1": set --temporal-tls-server-name`,
    );
  });

  it('no TLS flag against a TLS frontend says so', async () => {
    const { code, output } = await result('plain');
    expect(code).not.toBe(0);
    expect(output).toContain(`cannot connect to Temporal at ${address}: the server speaks TLS and no TLS flag is set`);
  });

  it('the operator CLI explains a missing client certificate the same way', async () => {
    const { code, output } = await result('cliNoCert');
    expect(code).toBe(1);
    expect(output).toContain(`${prefix}the server requires a client certificate (mTLS)`);
  });

  it('mTLS with the system roots (no --temporal-tls-ca): the node agent and the CLI verify the server by them', async () => {
    // The test CA stands in for the system roots, as below; components/temporal-mtls-system-roots runs this way.
    const name = 'system-roots';
    const flags = temporalConfigFlags({ address, namespace: config.namespace, tlsServerName, ...clientPair });
    const roots = { ...process.env, SSL_CERT_FILE: certs.ca, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: certs.ca };
    const node = spawnCli([...nodeArgs(name), ...flags], cluster.log(name), roots);
    const clients = connectCsi(`unix://${path.join(cluster.root, `${name}.sock`)}`);
    try {
      await eventually(
        'the node agent ready with the system roots',
        async () =>
          (await call<ProbeResponse__Output>((done) => clients.identity.Probe({}, withDeadline(3000), done))).ready
            ?.value,
        60_000,
      );
      const cli = spawnCli(
        ['volumes', 'stuck', '--driver-name', cluster.driverName, ...flags],
        cluster.log('cli'),
        roots,
      );
      expect(await new Promise((resolve) => cli.once('exit', resolve))).toBe(0);
    } finally {
      clients.close();
      await stopChild(node);
    }
  });

  it('--temporal-tls with an API key and the system roots (no client certificate) provisions a volume', async () => {
    // The frontend serves `localhost` without asking for client certificates (like an API-key endpoint); the test CA
    // stands in for the system roots: SSL_CERT_FILE for the SDK's Rust core (worker), GRPC_DEFAULT_SSL_ROOTS_FILE_PATH
    // for its grpc-js client.
    const apiKey = `test-api-key-${Math.random().toString(36).slice(2)}`;
    const apiKeyFile = path.join(cluster.root, 'api-key');
    fs.writeFileSync(apiKeyFile, `${apiKey}\n`, { mode: 0o600 });
    const port = address.split(':')[1];
    const tlsConfig: TemporalConfig = {
      address: `${API_KEY_SERVER_NAME}:${port}`,
      namespace: config.namespace,
      tls: true,
      apiKeyFile,
    };
    const apiCluster = new TestCluster('tls-api-key');
    // This test file's own copy of the environment (jest), inherited by the processes it starts.
    Object.assign(process.env, { SSL_CERT_FILE: certs.ca, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: certs.ca });
    process.env.DURABLE_CSI_TEST_TEMPORAL_CONFIG = JSON.stringify(tlsConfig);
    try {
      await apiCluster.startNode('node-k');
      const controller = await apiCluster.startController('controller');
      const clients = apiCluster.csi(controller.endpoint);
      const created = await retryLikeCo(() => createVolume(clients, createRequest('pvc-api-key')));
      const volumeId = created.volume?.volume_id ?? '';
      expect(apiCluster.volumesOnDisk('node-k')).toHaveLength(1);
      await retryLikeCo(() => deleteVolume(clients, volumeId));
      expect(apiCluster.volumesOnDisk('node-k')).toEqual([]);
      for (const name of ['node-k', 'controller'])
        expect(fs.readFileSync(apiCluster.log(name), 'utf8')).not.toContain(apiKey);
    } finally {
      process.env.DURABLE_CSI_TEST_TEMPORAL_CONFIG = JSON.stringify(config);
      delete process.env.SSL_CERT_FILE;
      delete process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH;
      await apiCluster.teardown();
    }
  });
});
