import http from 'node:http';

const POLL_MS = 250;
const REQUEST_TIMEOUT_MS = 2_000;

/** One GET of http://<address>/readyz: undefined on 200, else why not. */
export function readyzAnswer(address: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const request = http.get(`http://${address}/readyz`, { timeout: REQUEST_TIMEOUT_MS }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () =>
        resolve(response.statusCode === 200 ? undefined : body || `HTTP ${response.statusCode}`),
      );
    });
    request.on('timeout', () => request.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    request.on('error', (error) => resolve(error.message));
  });
}

/**
 * Polls /readyz on a process's metrics address until it answers 200 (the same readiness as its CSI Probe), or
 * throws after timeoutMs with the last answer. Plain HTTP: the dev stack's supervisor waits for its children
 * without loading gRPC and the CSI protobuf definitions (docs/performance.md, round 4).
 */
export async function waitUntilReadyz(address: string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < until) {
    const answer = await readyzAnswer(address);
    if (answer === undefined) return;
    last = answer;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  throw new Error(`http://${address}/readyz did not answer ready within ${timeoutMs / 1000} s (last: ${last})`);
}
