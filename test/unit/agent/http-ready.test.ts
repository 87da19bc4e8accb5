import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readyzAnswer, waitUntilReadyz } from '../../../agent/http-ready';

/** A /readyz that answers 503 `waiting` the first `notReadyFor` times, then 200. */
async function serveReadyz(notReadyFor: number): Promise<{ address: string; close(): Promise<void> }> {
  let asked = 0;
  const server = http.createServer((request, response) => {
    if (request.url !== '/readyz') return void response.writeHead(404).end();
    asked++;
    if (asked <= notReadyFor) response.writeHead(503).end('waiting for Temporal');
    else response.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { address: `127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('waiting for /readyz', () => {
  it('says why not while it answers 503, and nothing once it answers 200', async () => {
    const served = await serveReadyz(1);
    try {
      expect(await readyzAnswer(served.address)).toBe('waiting for Temporal');
      expect(await readyzAnswer(served.address)).toBeUndefined();
    } finally {
      await served.close();
    }
  });

  it('waits through not-ready answers', async () => {
    const served = await serveReadyz(3);
    try {
      await expect(waitUntilReadyz(served.address, 5_000)).resolves.toBeUndefined();
    } finally {
      await served.close();
    }
  });

  it('gives up after its timeout with the last answer', async () => {
    const served = await serveReadyz(1_000);
    try {
      await expect(waitUntilReadyz(served.address, 600)).rejects.toThrow(/did not answer ready.*waiting for Temporal/);
    } finally {
      await served.close();
    }
  });
});
