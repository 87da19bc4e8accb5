/**
 * One side of a node-to-node copy (storage/pool/transfer.ts) in a process of its own, for transfer.test.ts to kill
 * and start again; run compiled, from dist/. Each prints one line of JSON per event on stdout:
 *
 *   source <pool> <port> [<offer spec JSON>]  offers the spec if given, serves the pool's offers:
 *                                             {"listening": port, "offer": TransferOffer | null}
 *   target <pool> <pull spec JSON> <chunks>   pulls, with a checkpoint after every chunk; once the checkpoint holds
 *                                             <chunks> chunks: {"paused": n}, then waits to be killed;
 *                                             done: {"result": PullResult}
 *
 * A failure prints {"error": {"type", "message"}} and exits 1.
 */
import { DriverError } from '../../../common/failures';
import { PoolLayout } from '../../../storage/pool/pool-layout';
import { pullTransfer, TransferSource } from '../../../storage/pool/transfer';
import type { OfferSpec, PullSpec } from '../../../storage/pool/transfer';

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

async function main([role, pool, ...rest]: string[]): Promise<void> {
  const layout = new PoolLayout(pool ?? '');
  if (role === 'source') {
    const source = new TransferSource(layout);
    const offer = rest[1] === undefined ? null : await source.offer(JSON.parse(rest[1]) as OfferSpec);
    const { port } = await source.listen(Number(rest[0]), '127.0.0.1');
    print({ listening: port, offer });
    return; // the server keeps the process alive
  }
  if (role === 'target') {
    const pauseAt = Number(rest[1]);
    const result = await pullTransfer(layout, JSON.parse(rest[0] ?? '') as PullSpec, {
      checkpointEveryMs: 0,
      onProgress: async ({ phase, chunks }) => {
        if (phase !== 'copying' || chunks < pauseAt) return;
        print({ paused: chunks });
        setInterval(() => undefined, 60_000); // keeps the process up, whatever the socket does, until it is killed
        await new Promise(() => undefined);
      },
    });
    print({ result });
    return;
  }
  throw new Error(`unknown role ${String(role)}`);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const type = error instanceof DriverError ? error.type : 'Error';
  print({ error: { type, message: error instanceof Error ? error.message : String(error) } });
  process.exit(1);
});
