import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { KubeRest } from '../e2e-k8s/kube-rest';
import { makeTestCertificates } from '../temporal-prod/certificates';

/**
 * The test's Kubernetes client on a kept-alive connection the server drops: a server closing an idle connection as
 * the next request goes out on it is the race this meets on a loaded machine. The server here drops each
 * connection at its second request, unanswered, so every reuse meets it.
 */
describe('KubeRest on a kept-alive connection the server drops', () => {
  let dir: string;
  let server: https.Server;
  let rest: KubeRest;
  const served: string[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-kube-rest-'));
    const certs = await makeTestCertificates(dir);
    server = https.createServer(
      { cert: fs.readFileSync(certs.server.cert), key: fs.readFileSync(certs.server.key) },
      (request, response) => {
        const socket = request.socket as typeof request.socket & { requests?: number };
        socket.requests = (socket.requests ?? 0) + 1;
        if (socket.requests > 1 || request.url === '/reset') {
          socket.destroy();
          return;
        }
        served.push(`${request.method} ${request.url}`);
        response.setHeader('Content-Type', 'application/json');
        response.end(JSON.stringify({ path: request.url }));
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    rest = new KubeRest(`https://127.0.0.1:${(server.address() as AddressInfo).port}`, 'token');
  });
  afterAll(async () => {
    rest.close();
    await new Promise((resolve) => server.close(resolve));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('sends a request again, once, when the socket it reused was closed under it', async () => {
    expect(await rest.get('/first')).toEqual({ path: '/first' });
    // The second request goes out on the first's socket, which the server drops: it is sent again on a new one.
    expect(await rest.delete('/second')).toEqual({ path: '/second' });
    expect(await rest.create('/third', { a: 1 })).toEqual({ path: '/third' });
    expect(served).toEqual(['GET /first', 'DELETE /second', 'POST /third']);
  });

  it('does not send again a request reset on a new connection: that reset is an answer', async () => {
    rest.close();
    rest = new KubeRest(`https://127.0.0.1:${(server.address() as AddressInfo).port}`, 'token');
    served.length = 0;
    await expect(rest.get('/reset')).rejects.toThrow(/socket hang up|ECONNRESET/);
    expect(served).toEqual([]);
  });
});
