/**
 * Node-to-node copies (storage/pool/transfer.ts) on real files, over real TLS on 127.0.0.1; a side whose restart
 * matters runs in a process of its own (transfer-peer.ts, compiled: `npm run build` first) and is killed with
 * SIGKILL. Two pools per test under one temporary root, and a file beside them that nothing may touch.
 */
import { createHash, hkdfSync, randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { findProjectRoot } from '../../../common/project-root';
import { FailureType } from '../../../common/failures';
import { PoolLayout } from '../../../storage/pool/pool-layout';
import {
  CHUNK_BYTES,
  discardTransfer,
  listTransfers,
  pullTransfer,
  sealToken,
  transferPublicKey,
  transferStatus,
  TransferSource,
  writeStagedReservation,
} from '../../../storage/pool/transfer';
import type { PullOptions, PullResult, PullSpec, TransferOffer } from '../../../storage/pool/transfer';
import { unpackTree } from '../../../storage/host/tools';
import { findFreePort } from '../../../temporal-dev/free-port';
import { describeTree } from '../../support/describe-tree';
import { expectDriverError } from '../../support/driver-error';
import { randomKey } from './pool-fixture';

const PEER = path.join(findProjectRoot(), 'dist/test/unit/storage/transfer-peer.js');
/** Chunk by chunk: r random, 0 zeros; then a short tail of random bytes (the last chunk is not a full one). */
const PATTERN = 'rr0rrrr0rr';
const TAIL = 12_345;
const SIZE = PATTERN.length * CHUNK_BYTES + TAIL;
const ZERO_CHUNKS = [2, 7];
const NON_ZERO_BYTES = SIZE - ZERO_CHUNKS.length * CHUNK_BYTES;

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** The bytes of the chunks at and after `from` that are not zeros: what a pull from `from` must fetch. */
function nonZeroBytesFrom(from: number): number {
  let bytes = 0;
  for (let index = from; index <= PATTERN.length; index++) {
    if (ZERO_CHUNKS.includes(index)) continue;
    bytes += index === PATTERN.length ? TAIL : CHUNK_BYTES;
  }
  return bytes;
}

interface Peer {
  child: ChildProcess;
  /** The next line of JSON it prints that has `field`. */
  next(field: string): Promise<Record<string, unknown>>;
  kill(): Promise<void>;
}

function startPeer(args: string[]): Peer {
  if (!fs.existsSync(PEER)) throw new Error(`${PEER} is missing: run npm run build first`);
  const child = spawn(process.execPath, [PEER, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  let buffered = '';
  child.stdout?.on('data', (data: Buffer) => {
    buffered += data.toString();
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      lines.push(JSON.parse(buffered.slice(0, end)) as Record<string, unknown>);
      buffered = buffered.slice(end + 1);
    }
    for (const wake of waiters.splice(0)) wake();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => {
    for (const wake of waiters.splice(0)) wake();
  });
  return {
    child,
    async next(field) {
      for (;;) {
        const at = lines.findIndex((line) => field in line || 'error' in line);
        if (at >= 0) {
          const [line] = lines.splice(at, 1);
          if (line && 'error' in line && !(field in line)) throw new Error(`peer failed: ${JSON.stringify(line)}`);
          return line as Record<string, unknown>;
        }
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`peer exited before "${field}"`);
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

describe('node-to-node copies', () => {
  let root: string;
  let sourceLayout: PoolLayout;
  let targetLayout: PoolLayout;
  let outside: string;
  let outsideBefore: string[];
  let snapshotKey: string;
  let moveKey: string;
  let image: string;
  let original: Buffer;
  let targetPublicKey: string;
  const sources: TransferSource[] = [];
  const peers: Peer[] = [];

  /** Everything under the root but the two pools: what no copy may create, change or remove. */
  function outsideTree(): string[] {
    return fs
      .readdirSync(root, { recursive: true })
      .map(String)
      .filter((entry) => !/^(source|target)(\/|$)/.test(entry))
      .map((entry) => `${entry} ${fs.lstatSync(path.join(root, entry)).size}`)
      .sort();
  }

  function poolTree(pool: 'source' | 'target'): string[] {
    const dir = path.join(root, pool);
    return fs.existsSync(dir) ? fs.readdirSync(dir, { recursive: true }).map(String).sort() : [];
  }

  beforeEach(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-transfer-'));
    sourceLayout = new PoolLayout(path.join(root, 'source'));
    targetLayout = new PoolLayout(path.join(root, 'target'));
    fs.mkdirSync(sourceLayout.root);
    fs.mkdirSync(targetLayout.root);
    outside = path.join(root, 'outside');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'precious'), 'not the pool');
    snapshotKey = randomKey();
    moveKey = randomKey();
    image = sourceLayout.snapshotImage(snapshotKey);
    fs.mkdirSync(path.dirname(image), { recursive: true });
    original = Buffer.concat([
      ...[...PATTERN].map((kind) => (kind === 'r' ? randomBytes(CHUNK_BYTES) : Buffer.alloc(CHUNK_BYTES))),
      randomBytes(TAIL),
    ]);
    fs.writeFileSync(image, original);
    targetPublicKey = await transferPublicKey(targetLayout);
    outsideBefore = outsideTree();
  });

  afterEach(async () => {
    for (const peer of peers.splice(0)) await peer.kill();
    for (const source of sources.splice(0)) await source.close();
    try {
      expect(outsideTree()).toEqual(outsideBefore);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  async function startSource(): Promise<{ source: TransferSource; port: number }> {
    const source = new TransferSource(sourceLayout);
    sources.push(source);
    const { port } = await source.listen(await findFreePort(), '127.0.0.1');
    return { source, port };
  }

  function pullSpec(port: number, offer: TransferOffer): PullSpec {
    return { moveKey: offer.moveKey, source: { host: '127.0.0.1', port }, offer };
  }

  function expectCopied(result: PullResult): void {
    const staged = fs.readFileSync(targetLayout.transferImage(moveKey));
    expect(staged.length).toBe(SIZE);
    expect(sha256(staged)).toBe(sha256(original));
    expect(result.image).toBe(targetLayout.transferImage(moveKey));
  }

  /** Pull options that pause at the checkpoint holding `chunks` chunks and run `then` there, once. */
  function pausingAt(chunks: number, then: () => Promise<void> | void): PullOptions {
    let done = false;
    return {
      checkpointEveryMs: 0,
      onProgress: async (progress) => {
        if (done || progress.phase !== 'copying' || progress.chunks < chunks) return;
        done = true;
        await then();
      },
    };
  }

  it('copies a volume image whole and verified, its zero chunks never sent and left as holes', async () => {
    const { source, port } = await startSource();
    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });
    expect(offer).toMatchObject({ moveKey, sizeBytes: SIZE, chunkBytes: CHUNK_BYTES, chunkCount: PATTERN.length + 1 });

    const result = await pullTransfer(targetLayout, pullSpec(port, offer));

    expectCopied(result);
    expect(result).toMatchObject({ resumedFromChunk: 0, fetchedBytes: NON_ZERO_BYTES, zeroChunks: 2 });
    expect(result.refetchedChunks).toEqual([]);
    const { blocks } = fs.statSync(result.image);
    expect(blocks * 512).toBeLessThan(NON_ZERO_BYTES + CHUNK_BYTES); // two chunks of holes
    expect(await transferStatus(targetLayout, moveKey)).toEqual({
      image: result.image,
      verifiedChunks: PATTERN.length + 1,
      done: true,
    });
    // A second pull of a done copy answers at once, without the source.
    await source.withdraw(moveKey);
    expect(await pullTransfer(targetLayout, pullSpec(port, offer))).toMatchObject({ fetchedBytes: 0 });
    expect(poolTree('target').filter((entry) => !entry.startsWith('transfers'))).toEqual([]);
  });

  it("serves a dir pool's snapshot as one archive of its tree, extracted whole on the target; withdrawn with it", async () => {
    const treeKey = randomKey();
    const tree = sourceLayout.snapshotDir(treeKey);
    const file = (name: string) => path.join(tree, name);
    fs.mkdirSync(file('sub/deeper'), { recursive: true });
    fs.writeFileSync(file('sub/deeper/data'), randomBytes(3 * CHUNK_BYTES + 77));
    fs.writeFileSync(file('.hidden'), 'dot');
    fs.chmodSync(file('.hidden'), 0o640);
    fs.chownSync(file('.hidden'), 1234, 5678);
    fs.chmodSync(file('sub'), 0o2770);
    fs.symlinkSync(path.join(outside, 'precious'), file('link-out')); // a link, stored as one: never followed
    fs.linkSync(file('sub/deeper/data'), file('hard'));
    fs.writeFileSync(file('sparse'), 'x');
    fs.truncateSync(file('sparse'), 64 * 1024 ** 2);
    const source = new TransferSource(sourceLayout, { packTrees: true });
    sources.push(source);
    const { port } = await source.listen(await findFreePort(), '127.0.0.1');
    await expectDriverError(
      source.offer({ moveKey: randomKey(), snapshotKey: randomKey(), targetPublicKey }),
      FailureType.NotFound,
      /has no directory in pool/,
    );

    const offer = await source.offer({ moveKey, snapshotKey: treeKey, targetPublicKey });
    const archive = sourceLayout.transferArchive(moveKey);
    expect(fs.statSync(archive).size).toBe(offer.sizeBytes);
    // Offered again (a retried activity): the archive is not packed again, the manifest is the same.
    const packedAt = fs.statSync(archive).mtimeMs;
    expect((await source.offer({ moveKey, snapshotKey: treeKey, targetPublicKey })).manifestDigest).toBe(
      offer.manifestDigest,
    );
    expect(fs.statSync(archive).mtimeMs).toBe(packedAt);

    const result = await pullTransfer(targetLayout, pullSpec(port, offer));
    const into = path.join(targetLayout.root, 'volumes', 'moved');
    fs.mkdirSync(into, { recursive: true });
    await unpackTree(result.image, into, 60_000);
    expect(describeTree(into)).toEqual(describeTree(tree));
    expect(fs.statSync(path.join(into, 'hard')).ino).toBe(fs.statSync(path.join(into, 'sub/deeper/data')).ino);
    expect(fs.statSync(path.join(into, 'sparse')).blocks * 512).toBeLessThan(1024 ** 2);

    fs.writeFileSync(`${archive}.partial`, 'a pack a crash left half made');
    expect(await source.withdraw(moveKey)).toBe(true);
    expect(fs.existsSync(archive)).toBe(false);
    expect(fs.existsSync(sourceLayout.transferOfferFile(moveKey))).toBe(false);
    expect(fs.readdirSync(sourceLayout.transfersOutDir)).toEqual([]);
  });

  it("lists a pool's staged copies and offers for the orphan report, bounded, without a token, ignoring strays", async () => {
    expect(await listTransfers(sourceLayout, 10)).toEqual({ transfers: [], more: false });
    const { source, port } = await startSource();
    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });
    const half = Math.ceil((PATTERN.length + 1) / 2);
    const stopped = new AbortController();
    const pull = pullTransfer(targetLayout, pullSpec(port, offer), {
      ...pausingAt(half, () => stopped.abort()),
      signal: stopped.signal,
    });
    await expect(pull).rejects.toThrow();
    // Strays: a name that is no move key, on either side, is no leftover of this driver's.
    fs.mkdirSync(path.join(targetLayout.transfersInDir, 'not-a-move'));
    fs.writeFileSync(path.join(sourceLayout.transfersOutDir, 'notes.txt'), 'x');

    const onSource = await listTransfers(sourceLayout, 10);
    expect(onSource).toEqual({
      transfers: [
        { moveKey, direction: 'out', bytesOnDisk: expect.any(Number), modifiedAt: expect.any(String), snapshotKey },
      ],
      more: false,
    });
    expect(JSON.stringify(onSource)).not.toContain('token');
    // What the node activity reserves before a pull (PoolBackend.reserveStagedCopy) is listed with the copy.
    await writeStagedReservation(targetLayout, moveKey, SIZE);
    const onTarget = await listTransfers(targetLayout, 10);
    expect(onTarget.transfers).toEqual([
      {
        moveKey,
        direction: 'in',
        bytesOnDisk: expect.any(Number),
        modifiedAt: expect.any(String),
        verified: false,
        reservedBytes: SIZE,
      },
    ]);
    expect(onTarget.transfers[0]!.bytesOnDisk).toBeGreaterThanOrEqual(CHUNK_BYTES);
    expect(Date.parse(onTarget.transfers[0]!.modifiedAt)).toBeGreaterThan(Date.now() - 60_000);

    // Bounded: in/ first, and `more` says that some were left out.
    const other = randomKey();
    fs.mkdirSync(targetLayout.transferDir(other));
    const bounded = await listTransfers(targetLayout, 1);
    expect(bounded.more).toBe(true);
    expect(bounded.transfers).toHaveLength(1);
    expect(bounded.transfers[0]!.moveKey).toBe([moveKey, other].sort()[0]);
  });

  it('keeps the token out of the offer: only the target opens it', async () => {
    const { source } = await startSource();
    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });
    const stored = JSON.parse(fs.readFileSync(sourceLayout.transferOfferFile(moveKey), 'utf8')) as { token: string };
    const token = Buffer.from(stored.token, 'base64');
    const carried = JSON.stringify(offer);
    for (const form of ['base64', 'base64url', 'hex'] as const) expect(carried).not.toContain(token.toString(form));
    expect(fs.statSync(sourceLayout.transferOfferFile(moveKey)).mode & 0o077).toBe(0);
    expect(fs.statSync(targetLayout.transferKeyFile).mode & 0o077).toBe(0);

    // Sealed to the target: another node's pool (with a key of its own) cannot open it, and makes nothing trying.
    const other = new PoolLayout(path.join(root, 'target', 'other'));
    fs.mkdirSync(other.root);
    await transferPublicKey(other);
    const before = fs.readdirSync(other.root, { recursive: true }).map(String).sort();
    await expectDriverError(
      pullTransfer(other, pullSpec(1, offer)),
      FailureType.FailedPrecondition,
      /sealed token does not open with this node's transfer key/,
    );
    expect(fs.readdirSync(other.root, { recursive: true }).map(String).sort()).toEqual(before);
  });

  it('resumes from its checkpoint when the target process is killed part way, and fetches less', async () => {
    const { source, port } = await startSource();
    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });
    const target = startPeer(['target', targetLayout.root, JSON.stringify(pullSpec(port, offer)), '5']);
    peers.push(target);
    expect(await target.next('paused')).toEqual({ paused: 5 });
    await target.kill();

    const kept = await transferStatus(targetLayout, moveKey);
    expect(kept).toMatchObject({ verifiedChunks: 5, done: false });
    const result = await pullTransfer(targetLayout, pullSpec(port, offer));

    expectCopied(result);
    expect(result.resumedFromChunk).toBe(5);
    expect(result.fetchedBytes).toBe(nonZeroBytesFrom(5));
    expect(result.fetchedBytes).toBeLessThan(NON_ZERO_BYTES);
  });

  it('resumes from its checkpoint when the source process is killed part way and started again', async () => {
    const port = await findFreePort();
    const spec = { moveKey, snapshotKey, targetPublicKey };
    const first = startPeer(['source', sourceLayout.root, String(port), JSON.stringify(spec)]);
    peers.push(first);
    const { offer } = (await first.next('listening')) as { offer: TransferOffer };

    const cut = pullTransfer(
      targetLayout,
      pullSpec(port, offer),
      pausingAt(4, () => first.kill()),
    );
    await expectDriverError(cut, FailureType.Unavailable, /pull again to resume from the checkpoint/);
    await expectDriverError(
      pullTransfer(targetLayout, pullSpec(port, offer)),
      FailureType.Unavailable,
      /nothing listens for copies at 127\.0\.0\.1:\d+/,
    );

    const again = startPeer(['source', sourceLayout.root, String(port)]); // serves the offer its pool kept
    peers.push(again);
    expect(await again.next('listening')).toEqual({ listening: port, offer: null });
    const result = await pullTransfer(targetLayout, pullSpec(port, offer));

    expectCopied(result);
    expect(result.resumedFromChunk).toBeGreaterThanOrEqual(4);
    expect(result.fetchedBytes).toBe(nonZeroBytesFrom(result.resumedFromChunk));
    expect(result.fetchedBytes).toBeLessThan(NON_ZERO_BYTES);
  });

  it('stops a cancelled pull at once, keeping its checkpoint for the next', async () => {
    const { source, port } = await startSource();
    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });
    const controller = new AbortController();
    await expectDriverError(
      pullTransfer(targetLayout, pullSpec(port, offer), {
        ...pausingAt(3, () => controller.abort()),
        signal: controller.signal,
      }),
      FailureType.Aborted,
      /the pull of move \w+ was cancelled; its checkpoint is kept/,
    );
    const { verifiedChunks } = (await transferStatus(targetLayout, moveKey))!;
    expect(verifiedChunks).toBeGreaterThanOrEqual(3);
    const result = await pullTransfer(targetLayout, pullSpec(port, offer));
    expectCopied(result);
    expect(result.fetchedBytes).toBe(nonZeroBytesFrom(verifiedChunks));
  });

  it("re-fetches a chunk the final verification finds wrong on the target's disk", async () => {
    const { source, port } = await startSource();
    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });
    const staged = targetLayout.transferImage(moveKey);
    // Chunk 1 (verified as it landed) and chunk 2 (zeros, a hole) are damaged on disk after the fact.
    const damage = () => {
      const fd = fs.openSync(staged, 'r+');
      fs.writeSync(fd, Buffer.from([original[CHUNK_BYTES + 7]! ^ 0xff]), 0, 1, CHUNK_BYTES + 7);
      fs.writeSync(fd, Buffer.from([1]), 0, 1, 2 * CHUNK_BYTES + 99);
      fs.closeSync(fd);
    };

    const result = await pullTransfer(targetLayout, pullSpec(port, offer), pausingAt(6, damage));

    expectCopied(result);
    expect(result.refetchedChunks).toEqual([1, 2]);
    expect(result.fetchedBytes).toBe(NON_ZERO_BYTES + CHUNK_BYTES); // chunk 1 twice; the zeros written, not fetched
  });

  it("fails loudly on a chunk the source's copy no longer matches, then resumes once it does", async () => {
    const { source, port } = await startSource();
    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });
    const at = 5 * CHUNK_BYTES + 1000;
    const fd = fs.openSync(image, 'r+');
    fs.writeSync(fd, Buffer.from([original[at]! ^ 0x01]), 0, 1, at);

    await expectDriverError(
      pullTransfer(targetLayout, pullSpec(port, offer)),
      FailureType.Internal,
      /chunk 5 of move \w+ failed its checksum 3 times: the source's copy no longer matches the manifest/,
    );
    expect(await transferStatus(targetLayout, moveKey)).toMatchObject({ verifiedChunks: 5, done: false });

    fs.writeSync(fd, original, at, 1, at);
    fs.closeSync(fd);
    const result = await pullTransfer(targetLayout, pullSpec(port, offer));
    expectCopied(result);
    expect(result.resumedFromChunk).toBe(5);
    expect(result.fetchedBytes).toBe(nonZeroBytesFrom(5));
  });

  it('refuses a chunk corrupted on the wire (TLS), and the next pull resumes', async () => {
    const { source, port } = await startSource();
    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });
    // A forwarder that flips one bit of what the source sends, 12 MiB into the stream.
    let seen = 0;
    const flipper = net.createServer((client) => {
      const upstream = net.connect(port, '127.0.0.1');
      client.on('error', () => undefined);
      upstream.on('error', () => undefined);
      client.pipe(upstream);
      upstream.on('data', (data: Buffer) => {
        const at = 12 * 1024 ** 2 - seen;
        if (at >= 0 && at < data.length) data[at] = (data[at] ?? 0) ^ 0x10;
        seen += data.length;
        client.write(data);
      });
      upstream.on('close', () => client.destroy());
      client.on('close', () => upstream.destroy());
    });
    const flipPort = await findFreePort();
    await new Promise<void>((resolve) => flipper.listen(flipPort, '127.0.0.1', resolve));
    try {
      await expectDriverError(
        pullTransfer(targetLayout, pullSpec(flipPort, offer), { checkpointEveryMs: 0 }),
        FailureType.Unavailable,
        /channel to 127\.0\.0\.1:\d+ was corrupted in transit and TLS refused it/,
      );
    } finally {
      await new Promise<void>((resolve) => flipper.close(() => resolve()));
    }
    const { verifiedChunks } = (await transferStatus(targetLayout, moveKey))!;
    expect(verifiedChunks).toBeGreaterThan(0);
    const result = await pullTransfer(targetLayout, pullSpec(port, offer));
    expectCopied(result);
    expect(result.resumedFromChunk).toBe(verifiedChunks);
    expect(result.fetchedBytes).toBe(nonZeroBytesFrom(verifiedChunks));
  });

  it('refuses a wrong token, a move it does not offer, one withdrawn, and a second connection', async () => {
    const { source, port } = await startSource();
    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });

    // A token sealed correctly to the target, but not the one the source drew.
    const forged = {
      ...offer,
      sealedToken: sealToken(randomBytes(32), targetPublicKey, moveKey, offer.manifestDigest),
    };
    await expectDriverError(
      pullTransfer(targetLayout, pullSpec(port, forged)),
      FailureType.FailedPrecondition,
      /the source at 127\.0\.0\.1:\d+ refused move \w+'s token/,
    );
    // A move the source never offered.
    const otherKey = randomKey();
    const unknown = {
      ...offer,
      moveKey: otherKey,
      sealedToken: sealToken(randomBytes(32), targetPublicKey, otherKey, offer.manifestDigest),
    };
    await expectDriverError(
      pullTransfer(targetLayout, pullSpec(port, unknown)),
      FailureType.NotFound,
      new RegExp(`move ${otherKey} is not offered by the source at 127\\.0\\.0\\.1:${port}`),
    );

    // While the target's pull holds the move's connection, a second client, even one with the token (read from
    // the source's pool, as a thief would), is refused; so is a second pull in the target's process.
    const stored = JSON.parse(fs.readFileSync(sourceLayout.transferOfferFile(moveKey), 'utf8')) as { token: string };
    const psk = Buffer.from(
      hkdfSync(
        'sha256',
        Buffer.from(stored.token, 'base64'),
        Buffer.alloc(0),
        `durable-csi transfer psk v1\0${moveKey}`,
        32,
      ),
    );
    let second: string | undefined;
    const result = await pullTransfer(
      targetLayout,
      pullSpec(port, offer),
      pausingAt(3, async () => {
        second = await rawRequest(port, moveKey, psk);
        await expectDriverError(
          pullTransfer(targetLayout, pullSpec(port, offer)),
          FailureType.Aborted,
          /is already being pulled into pool/,
        );
      }),
    );
    expectCopied(result);
    expect(JSON.parse(second ?? '{}')).toMatchObject({
      error: 'Aborted',
      message: expect.stringMatching(/is being copied over another connection/),
    });
    // A client with a wrong key never gets an answer: the handshake fails.
    await expect(rawRequest(port, moveKey, randomBytes(32))).rejects.toMatchObject({
      code: 'ERR_SSL_SSLV3_ALERT_BAD_RECORD_MAC',
    });

    // Withdrawn (the move is done or cancelled): served no more, its token gone from the source's pool.
    expect(await source.withdraw(moveKey)).toBe(true);
    expect(fs.existsSync(sourceLayout.transferOfferFile(moveKey))).toBe(false);
    await discardTransfer(targetLayout, moveKey);
    await expectDriverError(pullTransfer(targetLayout, pullSpec(port, offer)), FailureType.NotFound, /not offered/);
  });

  it('rejects bad input before touching anything, and never reaches outside the pool', async () => {
    const { source, port } = await startSource();
    const sourceBefore = poolTree('source');
    await expectDriverError(
      source.offer({ moveKey: '../../outside', snapshotKey, targetPublicKey }),
      FailureType.InvalidArgument,
      /move key "..\/..\/outside" is not 32 lower-case hex digits/,
    );
    await expectDriverError(
      source.offer({ moveKey, snapshotKey: `${snapshotKey}/..`, targetPublicKey }),
      FailureType.InvalidArgument,
      /snapshot key/,
    );
    await expectDriverError(
      source.offer({ moveKey, snapshotKey, targetPublicKey: 'not a key' }),
      FailureType.InvalidArgument,
      /public key must be 43 base64url characters/,
    );
    await expectDriverError(
      source.offer({ moveKey, snapshotKey: randomKey(), targetPublicKey }),
      FailureType.NotFound,
      /has no image in pool .*: take the point-in-time copy before offering it/,
    );
    // A snapshot image that is a link to a file outside the pool is not served.
    const linked = randomKey();
    fs.mkdirSync(path.dirname(sourceLayout.snapshotImage(linked)), { recursive: true });
    fs.symlinkSync(path.join(outside, 'precious'), sourceLayout.snapshotImage(linked));
    await expectDriverError(
      source.offer({ moveKey, snapshotKey: linked, targetPublicKey }),
      FailureType.FailedPrecondition,
      /is a symbolic link: refusing it/,
    );
    fs.rmSync(path.dirname(sourceLayout.snapshotImage(linked)), { recursive: true });
    expect(poolTree('source')).toEqual(sourceBefore);

    const offer = await source.offer({ moveKey, snapshotKey, targetPublicKey });
    await expectDriverError(
      source.offer({ moveKey, snapshotKey, targetPublicKey: await transferPublicKey(sourceLayout) }),
      FailureType.AlreadyExists,
      /is already offered/,
    );
    const targetBefore = poolTree('target');
    await expectDriverError(
      pullTransfer(targetLayout, { ...pullSpec(port, offer), moveKey: '../x' }),
      FailureType.InvalidArgument,
      /move key/,
    );
    await expectDriverError(
      pullTransfer(targetLayout, pullSpec(port, { ...offer, chunkCount: 3 })),
      FailureType.InvalidArgument,
      /offer is not one to pull: its size, chunk size .* and chunk count do not agree/,
    );
    // The token the source drew, sealed with a manifest digest that is not the served manifest's.
    const stored = JSON.parse(fs.readFileSync(sourceLayout.transferOfferFile(moveKey), 'utf8')) as { token: string };
    const digest = 'f'.repeat(64);
    const mismatched = {
      ...offer,
      manifestDigest: digest,
      sealedToken: sealToken(Buffer.from(stored.token, 'base64'), targetPublicKey, moveKey, digest),
    };
    // (The source derives the PSK from the token and the move key only, so the handshake passes.)
    await expectDriverError(
      pullTransfer(targetLayout, pullSpec(port, mismatched)),
      FailureType.FailedPrecondition,
      /manifest the source at 127\.0\.0\.1:\d+ serves for move \w+ does not match the offer's digest/,
    );
    expect(poolTree('target')).toEqual(targetBefore);

    // A staging directory that is a link out of the pool is not written through.
    fs.mkdirSync(targetLayout.transfersInDir, { recursive: true });
    fs.symlinkSync(outside, targetLayout.transferDir(moveKey));
    await expectDriverError(
      pullTransfer(targetLayout, pullSpec(port, offer)),
      FailureType.Internal,
      /is not a directory of pool .*: refusing to write through it/,
    );
  });
});

/** One request on a raw TLS connection with this PSK; resolves the first line the source answers. */
function rawRequest(port: number, moveKey: string, psk: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port,
      ciphers: 'ECDHE-PSK-CHACHA20-POLY1305',
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.2',
      pskCallback: () => ({ psk, identity: moveKey }),
      checkServerIdentity: () => undefined,
    });
    let text = '';
    socket.on('secureConnect', () => socket.write('{"op":"manifest"}\n'));
    socket.on('data', (data: Buffer) => {
      text += data.toString();
      if (text.includes('\n')) {
        socket.destroy();
        resolve(text.slice(0, text.indexOf('\n')));
      }
    });
    socket.on('error', reject);
  });
}
