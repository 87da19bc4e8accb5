/**
 * Throughput of one node-to-node copy (storage/pool/transfer.ts) over loopback: `node dist/test/bench/transfer.js
 * [--gib 1] [--zeros 0.0]`. Two pools under os.tmpdir(), the source in a process of its own (as two agents are), a
 * snapshot image of random bytes (a share of its 4 MiB chunks all zeros with --zeros). Prints the source's manifest
 * time (reading and hashing the image), then the pull's: the copy (received, checked, written, checkpointed once a
 * second) and the final verification (read back and hashed), each in MiB/s of the image's size.
 */
import { spawn } from 'node:child_process';
import { randomFillSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PoolLayout } from '../../storage/pool/pool-layout';
import { CHUNK_BYTES, pullTransfer, transferPublicKey, TransferSource } from '../../storage/pool/transfer';
import type { OfferSpec, TransferOffer } from '../../storage/pool/transfer';
import { findFreePort } from '../../temporal-dev/free-port';

const MiB = 1024 ** 2;

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? Number(process.argv[at + 1]) : fallback;
}

/** The source's process: offers the spec, serves, prints {offer, manifestMs} and waits to be killed. */
async function serve(pool: string, port: number, spec: OfferSpec): Promise<void> {
  const source = new TransferSource(new PoolLayout(pool));
  const started = Date.now();
  const offer = await source.offer(spec);
  const manifestMs = Date.now() - started;
  await source.listen(port, '127.0.0.1');
  process.stdout.write(`${JSON.stringify({ offer, manifestMs })}\n`);
}

function writeImage(file: string, bytes: number, zeros: number): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const fd = fs.openSync(file, 'w');
  const chunk = Buffer.alloc(CHUNK_BYTES);
  for (let at = 0; at < bytes; at += CHUNK_BYTES) {
    if (Math.random() >= zeros) fs.writeSync(fd, randomFillSync(chunk), 0, Math.min(CHUNK_BYTES, bytes - at), at);
  }
  fs.ftruncateSync(fd, bytes);
  fs.fsyncSync(fd);
  fs.closeSync(fd);
}

async function main(): Promise<void> {
  if (process.argv[2] === '--serve') {
    const [pool, port, spec] = process.argv.slice(3);
    return serve(pool ?? '', Number(port), JSON.parse(spec ?? '') as OfferSpec);
  }
  const bytes = Math.round(option('gib', 1) * 1024 * MiB);
  const zeros = option('zeros', 0);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-transfer-bench-'));
  const source = new PoolLayout(path.join(root, 'source'));
  const target = new PoolLayout(path.join(root, 'target'));
  fs.mkdirSync(source.root);
  fs.mkdirSync(target.root);
  const snapshotKey = randomBytes(16).toString('hex');
  const moveKey = randomBytes(16).toString('hex');
  try {
    writeImage(source.snapshotImage(snapshotKey), bytes, zeros);
    const spec = { moveKey, snapshotKey, targetPublicKey: await transferPublicKey(target) };
    const port = await findFreePort();
    const server = spawn(process.execPath, [__filename, '--serve', source.root, String(port), JSON.stringify(spec)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let text = '';
        server.stdout.on('data', (data: Buffer) => {
          text += data.toString();
          if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')));
        });
        server.once('exit', (code) => reject(new Error(`the source exited (${code}) before it served`)));
      });
      const { offer, manifestMs } = JSON.parse(line) as { offer: TransferOffer; manifestMs: number };
      const started = Date.now();
      let copiedAt = started;
      const result = await pullTransfer(
        target,
        { moveKey, source: { host: '127.0.0.1', port }, offer },
        {
          onProgress: ({ phase, chunks, chunkCount }) => {
            if (phase === 'copying' && chunks === chunkCount) copiedAt = Date.now();
          },
        },
      );
      const ended = Date.now();
      const rate = (ms: number) => `${((bytes / MiB / Math.max(ms, 1)) * 1000).toFixed(0)} MiB/s`;
      const report = {
        imageMiB: bytes / MiB,
        zeroChunks: result.zeroChunks,
        chunkCount: result.chunkCount,
        fetchedMiB: +(result.fetchedBytes / MiB).toFixed(1),
        manifest: { ms: manifestMs, rate: rate(manifestMs) },
        copy: { ms: copiedAt - started, rate: rate(copiedAt - started) },
        verify: { ms: ended - copiedAt, rate: rate(ended - copiedAt) },
        pull: { ms: ended - started, rate: rate(ended - started) },
        loadAverage: os.loadavg().map((load) => +load.toFixed(2)),
        cpus: os.cpus().length,
      };
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    } finally {
      server.kill('SIGKILL');
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
