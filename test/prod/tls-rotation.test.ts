import fs from 'node:fs';
import path from 'node:path';
import { findFreePort } from '../../temporal-dev/free-port';
import { certificatesIn, issueClientCertificate } from '../temporal-prod/certificates';
import { probe, TestCluster } from '../support/cluster';
import { createRequest, createVolume, deleteVolume, retryLikeCo } from '../support/csi-requests';
import { TcpForwarder } from '../support/tcp-forwarder';
import { testTemporalConfig } from '../support/test-temporal';

/**
 * A client certificate renewed under running agents (cert-manager's short-lived certificates): the agents start with
 * one that expires within a minute, the Secret's files are swapped as kubelet swaps them (a new directory, then the
 * `..data` symbolic link renamed over), and once the old certificate has expired every connection to the frontend is
 * cut (a TCP forwarder stands between them). From then on the frontend (mTLS, requireClientAuth) refuses any
 * handshake made with the old certificate, so a CreateVolume and a DeleteVolume that complete, and a node that stays
 * ready, prove that both agents reconnected with the renewed one. Their /metrics say which certificate each presents.
 */
const EXPIRY = 'durable_csi_temporal_client_certificate_expiry_timestamp_seconds';

describe('a Temporal client certificate renewed under running agents', () => {
  const config = testTemporalConfig();
  const certs = certificatesIn(path.dirname(config.tlsCa ?? ''));
  const cluster = new TestCluster('tls-rotation');
  let forwarder: TcpForwarder | undefined;

  afterAll(async () => {
    await cluster.teardown();
    await forwarder?.close();
  });

  /** A Secret volume as kubelet lays it out: tls.crt, tls.key and ca.crt link through `..data` to a version dir. */
  const secret = path.join(cluster.root, 'temporal-tls');
  const mountSecret = (version: string, pair: { cert: string; key: string }) => {
    const dir = path.join(secret, `..${version}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(pair.cert, path.join(dir, 'tls.crt'));
    fs.copyFileSync(pair.key, path.join(dir, 'tls.key'));
    fs.copyFileSync(certs.ca, path.join(dir, 'ca.crt'));
    fs.symlinkSync(`..${version}`, path.join(secret, '..data_tmp'));
    fs.renameSync(path.join(secret, '..data_tmp'), path.join(secret, '..data'));
    for (const name of ['tls.crt', 'tls.key', 'ca.crt'])
      if (!fs.existsSync(path.join(secret, name))) fs.symlinkSync(path.join('..data', name), path.join(secret, name));
  };

  it('is used for every new connection: volumes are still made and deleted, the node stays ready', async () => {
    const suffix = path.basename(cluster.root);
    const expiring = await issueClientCertificate(certs, `expiring-${suffix}`, 45);
    mountSecret('v1', expiring);
    const port = await findFreePort();
    forwarder = await TcpForwarder.start(port, config.address);
    const flags = [
      '--temporal-address',
      `127.0.0.1:${port}`,
      '--temporal-tls-cert',
      path.join(secret, 'tls.crt'),
      '--temporal-tls-key',
      path.join(secret, 'tls.key'),
      '--temporal-tls-ca',
      path.join(secret, 'ca.crt'),
    ];
    const metrics = { 'node-r': `127.0.0.1:${await findFreePort()}`, controller: `127.0.0.1:${await findFreePort()}` };
    const node = await cluster.startNode('node-r', { extra: [...flags, '--metrics-address', metrics['node-r']] });
    const controller = await cluster.startController('controller', [...flags, '--metrics-address', metrics.controller]);
    /** Both agents' durable_csi_temporal_client_certificate_expiry_timestamp_seconds, as Date. */
    const presented = async () =>
      Promise.all(
        Object.values(metrics).map(async (address) => {
          const page = await (await fetch(`http://${address}/metrics`)).text();
          const sample = new RegExp(`^${EXPIRY}\\{[^}]*\\} (\\d+)$`, 'm').exec(page);
          return sample ? new Date(Number(sample[1]) * 1000) : undefined;
        }),
      );
    expect(await presented()).toEqual([expiring.notAfter, expiring.notAfter]);

    // The agents look at the files every 10 s: the renewal must land well before the old certificate ends.
    const margin = expiring.notAfter.getTime() - Date.now();
    if (margin < 22_000) throw new Error(`the agents took too long to start: ${margin} ms of validity left`);
    const renewed = await issueClientCertificate(certs, `renewed-${suffix}`, 2 * 86_400);
    mountSecret('v2', renewed);
    // Waiting for a moment of the wall clock, not for an event: the old certificate's end of validity.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiring.notAfter.getTime() + 2000 - Date.now())));
    forwarder.cut();

    const clients = cluster.csi(controller.endpoint);
    const created = await retryLikeCo(() => createVolume(clients, createRequest('pvc-renewed')), 40_000);
    expect(cluster.volumesOnDisk('node-r')).toHaveLength(1);
    await retryLikeCo(() => deleteVolume(clients, created.volume?.volume_id ?? ''), 40_000);
    expect(cluster.volumesOnDisk('node-r')).toEqual([]);
    expect(await probe(cluster.csi(node.endpoint))).toBe(true);
    expect(await presented()).toEqual([renewed.notAfter, renewed.notAfter]);
    for (const name of ['node-r', 'controller'])
      expect(fs.readFileSync(cluster.log(name), 'utf8')).toContain(
        'the Temporal TLS files changed: connected anew with them (client certificate valid until',
      );
  }, 150_000);
});
