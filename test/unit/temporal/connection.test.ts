import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { connectTemporal, explainConnectionFailure, TemporalConnectionError } from '../../../temporal/connection';
import { findFreePort } from '../../../temporal-dev/free-port';
import { makeTestCertificates } from '../../temporal-prod/certificates';

/**
 * Issue 33, item 12: a controller started during a Temporal outage keeps trying (agent/controller.ts), but a
 * misconfigured connection still stops it at once. The difference is `unreachable` on the connection's error.
 */
describe('a failed connection to Temporal', () => {
  it('is an outage (unreachable) when nothing listens at the address, and the SDK says so too', async () => {
    const address = `127.0.0.1:${await findFreePort()}`;
    const failure = await connectTemporal({ address, namespace: 'default' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(TemporalConnectionError);
    expect(failure).toMatchObject({
      unreachable: true,
      message: expect.stringContaining(`cannot connect to Temporal at ${address}: cannot reach it (ECONNREFUSED)`),
    });
  });

  it('is a misconfiguration (not unreachable) when the server speaks TLS and the driver does not', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-connection-'));
    const certs = await makeTestCertificates(path.join(dir, 'certs'));
    const server = tls.createServer({
      cert: fs.readFileSync(certs.server.cert),
      key: fs.readFileSync(certs.server.key),
    });
    server.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
      const failure = await explainConnectionFailure({ address, namespace: 'default' }, new Error('SDK: timed out'));
      expect(failure.unreachable).toBe(false);
      expect(failure.message).toContain('the server speaks TLS and no TLS flag is set');
    } finally {
      await new Promise((resolve) => server.close(resolve));
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
