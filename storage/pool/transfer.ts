/**
 * Node-to-node copies, for a move (issue 39; docs/volume-moves.md, docs/security.md "Node-to-node copies"): the
 * source node serves one point-in-time copy of a volume (a snapshot's image in its pool) to one target node, which
 * pulls it into a staging file of its own pool (<pool>/transfers/in/<move key>/), checks every chunk as it lands and
 * the whole file once more before it answers, and checkpoints as it goes, so that a restart of either side resumes
 * from the last verified chunk, not from zero.
 *
 * The channel is TLS 1.2 with an ephemeral-ECDH pre-shared key (ECDHE-PSK-CHACHA20-POLY1305): the PSK is derived from
 * a token the source draws for the move, its identity is the move key. The source seals the token to the target's
 * public key (X25519, kept in the target's pool), bound to the move key and the manifest's digest, so what a
 * workflow carries (TransferOffer, which Temporal keeps in its history) holds only ciphertext that the target alone
 * opens. The handshake proves to each side that the other holds the token: the source serves nothing to a client
 * without it, the target takes nothing from a server without it, and no certificate is needed (Node makes none).
 * A request names chunk numbers of the move's one file, never a path. One connection per move at a time.
 *
 * The wire, once the handshake is done: every message, either way, is a header (one line of JSON, at most 64 KiB)
 * followed by the raw bytes it announces (`bytes`). Requests: {op: 'manifest'}, {op: 'chunks', from} (every chunk
 * from `from` on) and {op: 'chunks', only} (those chunks). Answers: {manifest: true, bytes} and the manifest,
 * {chunk, bytes} and the chunk's data for each chunk that is not all zeros (the target knows those from the
 * manifest and leaves holes), {end: true} after the last, or {error, message} (a FailureType and why).
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  randomBytes,
} from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import tls from 'node:tls';
import { DriverError, FailureType, isFailureType } from '../../common/failures';
import {
  errorCode,
  fsyncDir,
  isNotFound,
  jsonFields,
  readFileIfExists,
  readJson,
  removeFile,
  removeTree,
  writeFileAtomic,
  writeFileOnce,
  writeJsonAtomic,
} from '../host/files';
import { packTree } from '../host/tools';
import { assertMoveKey, assertSnapshotKey, isVolumeKey, keyOfJsonFileName } from './pool-layout';
import type { PoolLayout } from './pool-layout';

const MiB = 1024 ** 2;
/** The name a tree's archive has while it is packed (packed whole, then renamed). */
const PARTIAL = '.partial';
/** A pack's time budget when the offer gives none. */
const PACK_BUDGET_MS = 60 * 60_000;
/** Fixed: large enough that a header and a hash per chunk cost nothing, small enough that a restart loses little. */
export const CHUNK_BYTES = 4 * MiB;
const CIPHERS = 'ECDHE-PSK-CHACHA20-POLY1305';
const TLS_VERSION = 'TLSv1.2'; // Node offers external PSKs with TLS 1.2 only.
const MAX_HEADER = 64 * 1024;
/** Chunks named in one {op: 'chunks', only} request (its header stays far below MAX_HEADER). */
const MAX_ONLY = 4096;
/** A chunk that fails its checksum this many times fails the pull (the source's copy changed under its manifest). */
const CHUNK_ATTEMPTS = 3;
/** A connection that neither sends nor receives for this long is closed, which frees the move's one connection. */
const IDLE_MS = 30_000;
const HANDSHAKE_MS = 10_000;
const SEAL_VERSION = 1;
const PSK_INFO = 'durable-csi transfer psk v1';
const DIGEST = /^[0-9a-f]{64}$/;
const PUBLIC_KEY = /^[A-Za-z0-9_-]{43}$/;

/* The node's key: X25519, in its pool, made once; the public half is what its node record publishes. */

/** This node's public key for copies (base64url of the raw X25519 key), made on first use. */
export async function transferPublicKey(layout: PoolLayout): Promise<string> {
  return rawPublicKey(createPublicKey(await transferKey(layout, true)));
}

/**
 * The private key, read from transfers/key.pem (mode 0600); made there first when `make` and absent. Never logged,
 * never in a message: a failure names the file, not its content.
 */
async function transferKey(layout: PoolLayout, make: boolean): Promise<KeyObject> {
  const file = layout.transferKeyFile;
  let pem = await readFileIfExists(file);
  if (pem === undefined && make) {
    await makeDirs(layout, [layout.transfersDir]);
    const { privateKey } = generateKeyPairSync('x25519');
    // The first writer wins: a key once published must never change under a sealed token.
    await writeFileOnce(file, privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), 0o600);
    pem = await readFileIfExists(file);
  }
  if (pem === undefined) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `pool ${layout.root} has no transfer key (${file}): no source can have sealed a token to this node; ` +
        "publish this node's transfer key first",
    );
  }
  try {
    const key = createPrivateKey(pem);
    if (key.asymmetricKeyType === 'x25519') return key;
  } catch {
    // named below, without the content
  }
  throw new DriverError(FailureType.Internal, `${file} is not an X25519 private key in PEM form`);
}

function rawPublicKey(key: KeyObject): string {
  const { x } = key.export({ format: 'jwk' });
  if (typeof x !== 'string') throw new DriverError(FailureType.Internal, 'an X25519 public key without its x');
  return x;
}

function parsePublicKey(text: unknown): KeyObject {
  if (typeof text === 'string' && PUBLIC_KEY.test(text)) {
    try {
      return createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: text }, format: 'jwk' });
    } catch {
      // named below
    }
  }
  throw new DriverError(
    FailureType.InvalidArgument,
    "a target's public key must be 43 base64url characters (a raw X25519 key, as transferPublicKey gives it)",
  );
}

/* The token, sealed to the target: X25519 with a fresh key, HKDF-SHA256, AES-256-GCM. */

function sealContext(moveKey: string, manifestDigest: string): Buffer {
  return Buffer.from(`durable-csi transfer token v${SEAL_VERSION}\0${moveKey}\0${manifestDigest}`);
}

function sealKey(shared: Buffer, ephemeral: Buffer, recipient: Buffer, context: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.concat([ephemeral, recipient]), context, 32));
}

/**
 * The token sealed to `targetPublicKey` for this move and manifest only: base64url of version, the fresh public key,
 * the nonce, the tag and the ciphertext. What TransferOffer carries; only the target's private key opens it.
 */
export function sealToken(token: Buffer, targetPublicKey: string, moveKey: string, manifestDigest: string): string {
  const recipient = parsePublicKey(targetPublicKey);
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const ephemeral = Buffer.from(rawPublicKey(publicKey), 'base64url');
  const context = sealContext(moveKey, manifestDigest);
  const shared = diffieHellman({ privateKey, publicKey: recipient });
  const key = sealKey(shared, ephemeral, Buffer.from(targetPublicKey, 'base64url'), context);
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(context);
  const sealed = Buffer.concat([cipher.update(token), cipher.final()]);
  return Buffer.concat([Buffer.from([SEAL_VERSION]), ephemeral, nonce, cipher.getAuthTag(), sealed]).toString(
    'base64url',
  );
}

function openToken(sealed: string, privateKey: KeyObject, moveKey: string, manifestDigest: string): Buffer {
  const bytes = Buffer.from(sealed, 'base64url');
  if (bytes.length === 1 + 32 + 12 + 16 + 32 && bytes[0] === SEAL_VERSION) {
    const ephemeral = bytes.subarray(1, 33);
    const context = sealContext(moveKey, manifestDigest);
    try {
      const publicKey = createPublicKey({
        key: { kty: 'OKP', crv: 'X25519', x: ephemeral.toString('base64url') },
        format: 'jwk',
      });
      const shared = diffieHellman({ privateKey, publicKey });
      const key = sealKey(
        shared,
        ephemeral,
        Buffer.from(rawPublicKey(createPublicKey(privateKey)), 'base64url'),
        context,
      );
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(33, 45));
      decipher.setAAD(context);
      decipher.setAuthTag(bytes.subarray(45, 61));
      return Buffer.concat([decipher.update(bytes.subarray(61)), decipher.final()]);
    } catch {
      // named below
    }
  }
  throw new DriverError(
    FailureType.FailedPrecondition,
    `move ${moveKey}'s sealed token does not open with this node's transfer key: it was sealed to another node, ` +
      "for another move or manifest, or this pool's key was replaced since it was published",
  );
}

/** The PSK of a move: derived from its token, so the token itself is never a TLS key. */
function pskOf(token: Buffer, moveKey: string): Buffer {
  return Buffer.from(hkdfSync('sha256', token, Buffer.alloc(0), `${PSK_INFO}\0${moveKey}`, 32));
}

/* The manifest: the file's size and each chunk's sha256 (an all-zero chunk's is that of its zeros). */

export interface TransferManifest {
  sizeBytes: number;
  chunkBytes: number;
  chunks: string[];
}

const ZERO = Buffer.alloc(CHUNK_BYTES);
const zeroHashes = new Map<number, string>();

function zeroHash(length: number): string {
  let hash = zeroHashes.get(length);
  if (hash === undefined) zeroHashes.set(length, (hash = sha256(ZERO.subarray(0, length))));
  return hash;
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** An all-zero chunk costs a compare, not a hash: fresh images are mostly zeros. */
function chunkHash(data: Buffer): string {
  return data.equals(ZERO.subarray(0, data.length)) ? zeroHash(data.length) : sha256(data);
}

function chunkCountOf(sizeBytes: number): number {
  return Math.ceil(sizeBytes / CHUNK_BYTES);
}

function chunkLength(manifest: TransferManifest, index: number): number {
  return Math.min(manifest.chunkBytes, manifest.sizeBytes - index * manifest.chunkBytes);
}

function isZeroChunk(manifest: TransferManifest, index: number): boolean {
  return manifest.chunks[index] === zeroHash(chunkLength(manifest, index));
}

/** The manifest as it is sent and hashed: fields in a fixed order, so its digest is the same on both sides. */
function manifestBytes({ sizeBytes, chunkBytes, chunks }: TransferManifest): Buffer {
  return Buffer.from(JSON.stringify({ v: 1, sizeBytes, chunkBytes, chunks }));
}

function parseManifest(value: unknown): TransferManifest | undefined {
  const { v, sizeBytes, chunkBytes, chunks } = jsonFields(value);
  if (v !== 1 || !isSize(sizeBytes) || chunkBytes !== CHUNK_BYTES || !Array.isArray(chunks)) return undefined;
  if (chunks.length !== chunkCountOf(sizeBytes)) return undefined;
  if (!chunks.every((hash) => typeof hash === 'string' && DIGEST.test(hash))) return undefined;
  return { sizeBytes, chunkBytes, chunks: chunks as string[] };
}

function isSize(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** Reads exactly `length` bytes at `position`; a file that ends before is an error (it shrank under the copy). */
async function readChunk(handle: FileHandle, position: number, length: number, file: string): Promise<Buffer> {
  const data = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(data, done, length - done, position + done);
    if (bytesRead === 0) {
      throw new DriverError(FailureType.Internal, `${file} ended at byte ${position + done}, inside its manifest`);
    }
    done += bytesRead;
  }
  return data;
}

/* Paths: only the layout's, and never through a symbolic link the pool did not make. */

/** Makes each directory that is missing (its parent fsynced) and refuses one that is a link or a file. */
async function makeDirs(layout: PoolLayout, dirs: string[]): Promise<void> {
  for (const dir of dirs) {
    try {
      await fs.mkdir(dir, { mode: 0o700 });
      await fsyncDir(path.dirname(dir));
    } catch (error) {
      if (errorCode(error) !== 'EEXIST') throw error;
    }
    const stat = await fs.lstat(dir);
    if (!stat.isDirectory()) {
      throw new DriverError(
        FailureType.Internal,
        `${dir} is not a directory of pool ${layout.root} (a symbolic link or a file is there): refusing to write ` +
          'through it',
      );
    }
  }
}

/** Opens without following a last symbolic link; the directories above were checked by makeDirs or are the layout's. */
async function openInPool(file: string, flags: number, what: string, mode?: number): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await fs.open(file, flags | fsConstants.O_NOFOLLOW, mode);
  } catch (error) {
    if (errorCode(error) === 'ELOOP') {
      throw new DriverError(FailureType.FailedPrecondition, `${what} (${file}) is a symbolic link: refusing it`);
    }
    throw error;
  }
  if (!(await handle.stat()).isFile()) {
    await handle.close();
    throw new DriverError(FailureType.FailedPrecondition, `${what} (${file}) is not a regular file`);
  }
  return handle;
}

/**
 * Whether a backend's moves carry an archive of the volume's tree (dir: its volumes and snapshots are directories)
 * rather than its image (loop): the one place that decides, for the source's offer and the target's adopt.
 */
export function movesAsArchive(backendKind: string): boolean {
  return backendKind === 'dir';
}

/* The source. */

export interface OfferSpec {
  moveKey: string;
  /**
   * The point-in-time copy to serve: the snapshot the move took, its image (snapshots/data/<key>/disk.img) or, on a
   * pool of trees (TransferSourceOptions.packTrees), an archive of its directory.
   */
  snapshotKey: string;
  /** The target's transferPublicKey, as its node record publishes it. */
  targetPublicKey: string;
  /** How long packing a tree may take (the pool's copy budget for the volume's size); 1 h when not given. */
  packBudgetMs?: number;
}

/** What the source answers an offer with, for the workflow to hand the target: nothing in it is secret. */
export interface TransferOffer {
  moveKey: string;
  sizeBytes: number;
  chunkBytes: number;
  chunkCount: number;
  /** sha256 of the manifest the source serves; the target takes no other. */
  manifestDigest: string;
  /** The move's token, sealed to the target (sealToken). */
  sealedToken: string;
}

/** An offer as the source keeps it (transfers/out/<move key>.json, mode 0600: it holds the token). */
interface StoredOffer {
  moveKey: string;
  snapshotKey: string;
  targetPublicKey: string;
  token: Buffer;
  manifest: TransferManifest;
  manifestDigest: string;
}

interface Served extends StoredOffer {
  image: string;
  psk: Buffer;
  manifestPayload: Buffer;
  /** The move's one connection. */
  active?: tls.TLSSocket;
}

/** What a source refused and why (never a token or a key): for the agent's log. */
export interface Refusal {
  moveKey?: string;
  remote?: string;
  reason: string;
}

export interface TransferSourceOptions {
  idleTimeoutMs?: number;
  /**
   * The pool's snapshots are directory trees (the dir backend): an offer serves an archive of its snapshot
   * (transfers/out/<move key>.tar, storage/host/tools.ts packTree), packed once before it is hashed, removed with
   * the offer. The target extracts it into the new volume (DirBackend.copyIn).
   */
  packTrees?: boolean;
  onRefused?: (refusal: Refusal) => void;
}

async function readOffer(layout: PoolLayout, moveKey: string): Promise<StoredOffer | undefined> {
  const file = layout.transferOfferFile(moveKey);
  const value = await readJson(file);
  if (value === undefined) return undefined;
  const fields = jsonFields(value);
  const manifest = parseManifest(fields.manifest);
  const { snapshotKey, targetPublicKey, token, manifestDigest } = fields;
  if (
    fields.moveKey !== moveKey ||
    !isVolumeKey(snapshotKey) ||
    typeof targetPublicKey !== 'string' ||
    typeof token !== 'string' ||
    !manifest ||
    manifestDigest !== sha256(manifestBytes(manifest))
  ) {
    throw new DriverError(FailureType.Internal, `${file} is not a transfer offer for move ${moveKey}`);
  }
  return { moveKey, snapshotKey, targetPublicKey, token: Buffer.from(token, 'base64'), manifest, manifestDigest };
}

/**
 * The source side: serves each offer of its pool, on one port, to the one client holding that offer's token. Offers
 * are kept in the pool, so a restarted agent serves them again (listen loads them) until they are withdrawn.
 */
export class TransferSource {
  private readonly moves = new Map<string, Served>();
  /** Packs of a tree in progress, by move key (packTrees). */
  private readonly packing = new Map<string, Promise<void>>();
  private readonly identities = new WeakMap<tls.TLSSocket, string>();
  private readonly sockets = new Set<tls.TLSSocket>();
  private server?: tls.Server;
  private readonly idleMs: number;

  constructor(
    readonly layout: PoolLayout,
    private readonly options: TransferSourceOptions = {},
  ) {
    this.idleMs = options.idleTimeoutMs ?? IDLE_MS;
  }

  /** Loads the pool's offers, then listens; resolves the address bound (port 0 picks one). */
  async listen(port: number, host: string): Promise<{ host: string; port: number }> {
    await this.load();
    const server = tls.createServer({
      ciphers: CIPHERS,
      minVersion: TLS_VERSION,
      maxVersion: TLS_VERSION,
      handshakeTimeout: HANDSHAKE_MS,
      pskCallback: (socket, identity) => this.pskFor(socket, identity),
    });
    server.on('secureConnection', (socket) => this.accept(socket));
    server.on('tlsClientError', (error, socket) => {
      this.options.onRefused?.({
        moveKey: this.identities.get(socket),
        remote: socket.remoteAddress,
        reason: `TLS handshake failed: ${errorCode(error) ?? error.message}`,
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('a TLS server without a TCP address');
    return { host: address.address, port: address.port };
  }

  /**
   * Offers the snapshot's image to the target: hashes it into a manifest (onProgress after each chunk, for a
   * heartbeat), draws a token, keeps both in the pool, and answers with the token sealed to the target. Offered
   * again with the same spec (a retried activity), the same token is sealed again without hashing; a move key
   * already offered for another snapshot or target is AlreadyExists.
   */
  async offer(spec: OfferSpec, onProgress?: (hashedBytes: number) => void | Promise<void>): Promise<TransferOffer> {
    const { moveKey, snapshotKey, targetPublicKey } = spec;
    assertMoveKey(moveKey);
    assertSnapshotKey(snapshotKey);
    parsePublicKey(targetPublicKey);
    const file = this.layout.transferOfferFile(moveKey);
    let stored = await readOffer(this.layout, moveKey);
    if (!stored) {
      if (this.options.packTrees) await this.pack(moveKey, snapshotKey, spec.packBudgetMs ?? PACK_BUDGET_MS);
      const manifest = await this.hashImage(this.imageOf(moveKey, snapshotKey), snapshotKey, onProgress);
      const made: StoredOffer = {
        moveKey,
        snapshotKey,
        targetPublicKey,
        token: randomBytes(32),
        manifest,
        manifestDigest: sha256(manifestBytes(manifest)),
      };
      await makeDirs(this.layout, [this.layout.transfersDir, this.layout.transfersOutDir]);
      const text = `${JSON.stringify({
        moveKey,
        snapshotKey,
        targetPublicKey,
        token: made.token.toString('base64'),
        manifestDigest: made.manifestDigest,
        manifest: JSON.parse(manifestBytes(manifest).toString()) as unknown,
        offeredAt: new Date().toISOString(),
      })}\n`;
      // Written once: two offers of one move racing must answer with one token.
      stored = (await writeFileOnce(file, text, 0o600)) ? made : await readOffer(this.layout, moveKey);
      if (!stored) throw new DriverError(FailureType.Aborted, `move ${moveKey}'s offer vanished while it was made`);
    }
    if (stored.snapshotKey !== snapshotKey || stored.targetPublicKey !== targetPublicKey) {
      throw new DriverError(
        FailureType.AlreadyExists,
        `move ${moveKey} is already offered, of snapshot ${stored.snapshotKey} to another target or of another ` +
          'snapshot: withdraw it first, or use a new move key',
      );
    }
    this.register(stored);
    const { sizeBytes, chunkBytes, chunks } = stored.manifest;
    return {
      moveKey,
      sizeBytes,
      chunkBytes,
      chunkCount: chunks.length,
      manifestDigest: stored.manifestDigest,
      sealedToken: sealToken(stored.token, targetPublicKey, moveKey, stored.manifestDigest),
    };
  }

  /**
   * Stops serving the move (done, or cancelled): its connection is cut and its offer, token included, removed from
   * the pool. False when it was not offered.
   */
  async withdraw(moveKey: string): Promise<boolean> {
    assertMoveKey(moveKey);
    const served = this.moves.get(moveKey);
    this.moves.delete(moveKey);
    served?.active?.destroy();
    // The archive first: an offer left by a crash in between is still listed (the orphan report), and withdrawn again.
    // A pack a crash or a terminated move left half made goes too.
    const archive = this.layout.transferArchive(moveKey);
    const removed = this.options.packTrees ? [await removeFile(`${archive}${PARTIAL}`), await removeFile(archive)] : [];
    return (await removeFile(this.layout.transferOfferFile(moveKey))) || served !== undefined || removed.includes(true);
  }

  /** The moves this source serves, by key. */
  offered(): string[] {
    return [...this.moves.keys()].sort();
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async load(): Promise<void> {
    let names: string[];
    try {
      names = await fs.readdir(this.layout.transfersOutDir);
    } catch (error) {
      if (isNotFound(error)) return;
      throw error;
    }
    for (const name of names.sort()) {
      const key = keyOfJsonFileName(name);
      if (key === undefined) continue; // a temporary file a crash left, or a stray: not an offer
      try {
        const stored = await readOffer(this.layout, key);
        if (stored) this.register(stored);
      } catch (error) {
        this.options.onRefused?.({ moveKey: key, reason: `offer not served: ${(error as Error).message}` });
      }
    }
  }

  private register(stored: StoredOffer): void {
    if (this.moves.has(stored.moveKey)) return;
    this.moves.set(stored.moveKey, {
      ...stored,
      image: this.imageOf(stored.moveKey, stored.snapshotKey),
      psk: pskOf(stored.token, stored.moveKey),
      manifestPayload: manifestBytes(stored.manifest),
    });
  }

  /** The one file a move serves: its snapshot's image, or the archive of its snapshot's tree. */
  private imageOf(moveKey: string, snapshotKey: string): string {
    return this.options.packTrees ? this.layout.transferArchive(moveKey) : this.layout.snapshotImage(snapshotKey);
  }

  /**
   * The snapshot's tree packed into the move's archive: whole under a temporary name, then renamed, so that no offer
   * ever hashes a partial one. Packs of one move in this process take turns (a retried offer while the first still
   * packs); a pack that a crash interrupted is done again by the next offer (no offer names it yet).
   */
  private async pack(moveKey: string, snapshotKey: string, budgetMs: number): Promise<void> {
    const earlier = this.packing.get(moveKey);
    const packing = (async () => {
      await earlier?.catch(() => undefined);
      const tree = this.layout.snapshotDir(snapshotKey);
      if (!(await fs.lstat(tree).catch(() => undefined))?.isDirectory()) {
        throw new DriverError(
          FailureType.NotFound,
          `snapshot ${snapshotKey} has no directory in pool ${this.layout.root} (${tree}): take the point-in-time ` +
            'copy before offering it',
        );
      }
      await makeDirs(this.layout, [this.layout.transfersDir, this.layout.transfersOutDir]);
      const archive = this.layout.transferArchive(moveKey);
      const partial = `${archive}${PARTIAL}`;
      await fs.rm(partial, { force: true });
      await packTree(tree, partial, budgetMs);
      await fs.rename(partial, archive);
      await fsyncDir(this.layout.transfersOutDir);
    })();
    this.packing.set(moveKey, packing);
    try {
      await packing;
    } finally {
      if (this.packing.get(moveKey) === packing) this.packing.delete(moveKey);
    }
  }

  private async hashImage(
    image: string,
    snapshotKey: string,
    onProgress?: (hashedBytes: number) => void | Promise<void>,
  ): Promise<TransferManifest> {
    const handle = await this.openImage(image, snapshotKey);
    try {
      const { size } = await handle.stat();
      const chunks: string[] = [];
      for (let index = 0; index < chunkCountOf(size); index++) {
        const position = index * CHUNK_BYTES;
        chunks.push(chunkHash(await readChunk(handle, position, Math.min(CHUNK_BYTES, size - position), image)));
        await onProgress?.(Math.min(size, position + CHUNK_BYTES));
      }
      return { sizeBytes: size, chunkBytes: CHUNK_BYTES, chunks };
    } finally {
      await handle.close();
    }
  }

  private async openImage(image: string, snapshotKey: string): Promise<FileHandle> {
    try {
      return await openInPool(image, fsConstants.O_RDONLY, `snapshot ${snapshotKey}'s image`);
    } catch (error) {
      if (!isNotFound(error)) throw error;
      throw new DriverError(
        FailureType.NotFound,
        `snapshot ${snapshotKey} has no image in pool ${this.layout.root} (${image}): take the point-in-time copy ` +
          'before offering it',
      );
    }
  }

  /** TLS asks synchronously: the PSK of an offered move, or null (the client is told "unknown PSK identity"). */
  private pskFor(socket: tls.TLSSocket, identity: string): Buffer | null {
    const served = this.moves.get(identity);
    if (!served) {
      this.options.onRefused?.({
        moveKey: identity.slice(0, 64),
        remote: socket.remoteAddress,
        reason: 'move not offered here',
      });
      return null;
    }
    this.identities.set(socket, identity);
    return served.psk;
  }

  private accept(socket: tls.TLSSocket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined); // a peer gone mid-write: the session sees the close
    socket.setKeepAlive(true);
    socket.setTimeout(this.idleMs, () => socket.destroy());
    const moveKey = this.identities.get(socket);
    const served = moveKey === undefined ? undefined : this.moves.get(moveKey);
    if (!served) {
      void refuse(socket, FailureType.NotFound, `move ${moveKey ?? '?'} is no longer offered here`);
      return;
    }
    if (served.active && !served.active.destroyed) {
      this.options.onRefused?.({ moveKey, remote: socket.remoteAddress, reason: 'a second connection' });
      void refuse(
        socket,
        FailureType.Aborted,
        `move ${served.moveKey} is being copied over another connection; one connection per move: try again ` +
          `once it ends (an idle one is closed after ${Math.round(this.idleMs / 1000)} s)`,
      );
      return;
    }
    served.active = socket;
    socket.on('close', () => {
      if (served.active === socket) served.active = undefined;
    });
    void this.session(socket, served).catch(async (error: unknown) => {
      const type = error instanceof DriverError ? error.type : FailureType.Internal;
      await refuse(socket, type, error instanceof Error ? error.message : String(error));
    });
  }

  /** Answers the client's requests, one at a time, until it ends the connection. */
  private async session(socket: tls.TLSSocket, served: Served): Promise<void> {
    const frames = new FrameReader(socket);
    let handle: FileHandle | undefined;
    try {
      for (;;) {
        const request = await frames.header();
        if (request === undefined) return;
        if (request.op === 'manifest') {
          await send(socket, { manifest: true, bytes: served.manifestPayload.length }, served.manifestPayload);
        } else if (request.op === 'chunks') {
          const indices = requestedChunks(request, served.manifest);
          handle ??= await this.openImage(served.image, served.snapshotKey);
          await this.sendChunks(socket, handle, served, indices);
        } else {
          throw new DriverError(FailureType.InvalidArgument, `unknown request ${JSON.stringify(request.op)}`);
        }
      }
    } finally {
      await handle?.close();
    }
  }

  /** Each chunk that is not all zeros, in order, the next read from disk while this one is sent. */
  private async sendChunks(socket: tls.TLSSocket, handle: FileHandle, served: Served, indices: number[]) {
    const { manifest, image } = served;
    const wanted = indices.filter((index) => !isZeroChunk(manifest, index));
    const read = (index: number) => readChunk(handle, index * manifest.chunkBytes, chunkLength(manifest, index), image);
    let next = wanted[0] === undefined ? undefined : read(wanted[0]);
    for (let at = 0; at < wanted.length; at++) {
      const index = wanted[at] as number;
      const data = await (next as Promise<Buffer>);
      next = wanted[at + 1] === undefined ? undefined : read(wanted[at + 1] as number);
      next?.catch(() => undefined); // awaited on the next turn; a socket closed first must not leave it unhandled
      if (this.moves.get(served.moveKey) !== served || socket.destroyed) return; // withdrawn, or the client left
      await send(socket, { chunk: index, bytes: data.length }, data);
    }
    await send(socket, { end: true });
  }
}

/** The chunks a {op: 'chunks'} request names, checked against the manifest. */
function requestedChunks(request: Partial<Record<string, unknown>>, manifest: TransferManifest): number[] {
  const count = manifest.chunks.length;
  const isIndex = (value: unknown): value is number =>
    typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && value < count;
  if (request.from !== undefined) {
    if (!isIndex(request.from) && request.from !== count) {
      throw new DriverError(FailureType.OutOfRange, `chunk ${String(request.from)} is not in 0..${count}`);
    }
    return Array.from({ length: count - request.from }, (_, offset) => (request.from as number) + offset);
  }
  const only = request.only;
  if (!Array.isArray(only) || only.length > MAX_ONLY || !only.every(isIndex)) {
    throw new DriverError(
      FailureType.OutOfRange,
      `a chunks request names "from" or at most ${MAX_ONLY} chunks in "only", each in 0..${count - 1}`,
    );
  }
  return only;
}

async function refuse(socket: tls.TLSSocket, type: FailureType, message: string): Promise<void> {
  try {
    await send(socket, { error: type, message });
  } catch {
    // the peer is gone: nobody to tell
  }
  socket.end();
}

/** Writes a header and its bytes; resolves once the socket takes more (back-pressure), rejects if it closes. */
async function send(socket: tls.TLSSocket, header: Record<string, unknown>, data?: Buffer): Promise<void> {
  if (socket.destroyed) throw new DriverError(FailureType.Unavailable, 'the connection is closed');
  socket.write(`${JSON.stringify(header)}\n`);
  if (data === undefined ? socket.writableNeedDrain : !socket.write(data)) {
    await new Promise<void>((resolve, reject) => {
      const drained = () => {
        socket.off('close', closed);
        resolve();
      };
      const closed = () => {
        socket.off('drain', drained);
        reject(new DriverError(FailureType.Unavailable, 'the connection closed'));
      };
      socket.once('drain', drained);
      socket.once('close', closed);
    });
  }
}

/** A connection that ended where it must not, as Node names it (channelError tells the workflow what to do). */
function prematureClose(message: string): Error {
  return Object.assign(new Error(message), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

/** Headers and the bytes after them, read from a socket; its errors surface from the read that meets them. */
class FrameReader {
  private pieces: Buffer[] = [];
  private buffered = 0;
  private ended = false;
  private readonly source: AsyncIterator<Buffer>;

  constructor(socket: tls.TLSSocket) {
    this.source = socket[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  }

  /** The next header; undefined when the peer ended the connection between messages. */
  async header(): Promise<Partial<Record<string, unknown>> | undefined> {
    for (;;) {
      if (this.pieces.length > 1) this.pieces = [Buffer.concat(this.pieces)];
      const joined = this.pieces[0];
      const end = joined === undefined ? -1 : joined.indexOf(10);
      if (joined !== undefined && end >= 0) {
        const rest = joined.subarray(end + 1);
        this.pieces = rest.length > 0 ? [rest] : [];
        this.buffered = rest.length;
        let value: unknown;
        try {
          value = JSON.parse(joined.subarray(0, end).toString('utf8'));
        } catch {
          throw new DriverError(FailureType.Internal, 'a message header that is not JSON');
        }
        if (typeof value !== 'object' || value === null) throw new DriverError(FailureType.Internal, 'a bad header');
        return value as Partial<Record<string, unknown>>;
      }
      if (this.buffered > MAX_HEADER) throw new DriverError(FailureType.Internal, 'a message header over 64 KiB');
      if (!(await this.more())) {
        if (this.buffered === 0) return undefined;
        throw prematureClose('the connection ended inside a message header');
      }
    }
  }

  async bytes(length: number): Promise<Buffer> {
    while (this.buffered < length) {
      if (!(await this.more())) throw prematureClose('the connection ended inside a message');
    }
    const first = this.pieces[0] as Buffer;
    const joined = first.length >= length ? first : Buffer.concat(this.pieces);
    const rest = joined.subarray(length);
    this.pieces = rest.length > 0 ? [rest] : [];
    this.buffered = rest.length;
    return joined.subarray(0, length);
  }

  private async more(): Promise<boolean> {
    if (this.ended) return false;
    const next = await this.source.next();
    if (next.done) {
      this.ended = true;
      return false;
    }
    this.pieces.push(next.value);
    this.buffered += next.value.length;
    return true;
  }
}

/* The target. */

export interface PullSpec {
  moveKey: string;
  /** Where the source's TransferSource listens (its node record). */
  source: { host: string; port: number };
  offer: TransferOffer;
}

export interface PullProgress {
  /** copying: chunks verified as they landed (the checkpoint's); verifying: chunks read back and checked. */
  phase: 'copying' | 'verifying';
  chunks: number;
  chunkCount: number;
  fetchedBytes: number;
}

export interface PullOptions {
  /** Called after each checkpoint (and as often while verifying), and awaited: a heartbeat. */
  onProgress?: (progress: PullProgress) => void | Promise<void>;
  signal?: AbortSignal;
  /** How often the checkpoint is written while chunks land (0: after every chunk). */
  checkpointEveryMs?: number;
  idleTimeoutMs?: number;
}

export interface PullResult {
  /** The verified copy, inside the target's pool. */
  image: string;
  sizeBytes: number;
  chunkCount: number;
  /** The checkpoint this pull started from (chunkCount: it was already done). */
  resumedFromChunk: number;
  /** Chunk bytes received from the source by this pull. */
  fetchedBytes: number;
  fetchedChunks: number;
  /** Chunks of zeros, left as holes and never sent. */
  zeroChunks: number;
  /** Chunks the final verification found wrong on disk and fetched (or zeroed) again. */
  refetchedChunks: number[];
}

/** A pull's durable state (transfers/in/<move key>/checkpoint.json): the chunks before verifiedChunks are on disk. */
interface Checkpoint {
  manifestDigest: string;
  verifiedChunks: number;
  /** The final verification passed. */
  done: boolean;
}

/** Moves being pulled in this process, by pool and key: one pull per move (a retried activity waits its turn). */
const pulling = new Set<string>();

/**
 * Pulls the offered copy into transfers/in/<move key>/disk.img of the target's pool, from its checkpoint if there is
 * one, and resolves once every chunk is on disk and the whole file has been read back and matched the manifest.
 * Idempotent: a pull of a copy already done answers at once. Failures: InvalidArgument (a malformed spec, before
 * anything is touched), FailedPrecondition (a token that does not open here or that the source refuses, a manifest
 * that does not match the offer), NotFound (the source does not offer the move), Aborted (the move is pulled or
 * copied already, or cancelled), Unavailable (the source unreachable, the channel cut: pull again to resume),
 * ResourceExhausted (no room in the pool), Internal (a chunk that keeps failing its checksum).
 */
export async function pullTransfer(layout: PoolLayout, spec: PullSpec, options: PullOptions = {}): Promise<PullResult> {
  const { moveKey, source, offer } = checkPullSpec(spec);
  const token = openToken(offer.sealedToken, await transferKey(layout, false), moveKey, offer.manifestDigest);
  const held = `${layout.root}\0${moveKey}`;
  if (pulling.has(held)) {
    throw new DriverError(FailureType.Aborted, `move ${moveKey} is already being pulled into pool ${layout.root}`);
  }
  pulling.add(held);
  try {
    return await new Pull(layout, moveKey, source, offer, pskOf(token, moveKey), options).run();
  } finally {
    pulling.delete(held);
  }
}

/** Removes a pull's staging directory (a move rolled back or abandoned). False when there was none. */
export async function discardTransfer(layout: PoolLayout, moveKey: string): Promise<boolean> {
  assertMoveKey(moveKey);
  if (pulling.has(`${layout.root}\0${moveKey}`)) {
    throw new DriverError(FailureType.Aborted, `move ${moveKey} is being pulled: cancel the pull first`);
  }
  const dir = layout.transferDir(moveKey);
  const existed = (await fs.lstat(dir).catch(() => undefined)) !== undefined;
  if (existed) await removeTree(dir);
  return existed;
}

/*
 * Room on the target. A staged copy holds the pool capacity its volume will take, from before the pull writes
 * anything until the adopt records the volume (or the copy is discarded): otherwise a create, or a second move, could
 * take that room while the copy runs (for hours, for a large volume), and the adopt would fail at the very end. The
 * reservation is a file in the copy's directory, written with the pool held (PoolBackend.reserveStagedCopy), so the
 * disk stays the truth: a restart keeps it, removing the directory by hand (a stranded transfer) releases it.
 */

/** The bytes a move's staged copy reserves; undefined: no reservation (none made, or released by the adopt). */
export async function stagedReservation(layout: PoolLayout, moveKey: string): Promise<number | undefined> {
  const value = await readJson(layout.transferReservationFile(moveKey)).catch(() => undefined);
  const { bytes } = jsonFields(value);
  return isSize(bytes) ? bytes : undefined;
}

/** Every staged copy's reservation on the pool (a pool with no transfers/: one failed readdir). */
export async function stagedReservations(layout: PoolLayout): Promise<number> {
  const names = (await fs.readdir(layout.transfersInDir).catch(ignoreNotFound)) ?? [];
  let bytes = 0;
  for (const moveKey of names.filter(isVolumeKey)) bytes += (await stagedReservation(layout, moveKey)) ?? 0;
  return bytes;
}

/** Only with the pool held, its room checked: PoolBackend.reserveStagedCopy. */
export async function writeStagedReservation(layout: PoolLayout, moveKey: string, bytes: number): Promise<void> {
  await makeDirs(layout, [layout.transfersDir, layout.transfersInDir, layout.transferDir(moveKey)]);
  await writeJsonAtomic(layout.transferReservationFile(moveKey), { bytes }, 0o600);
}

/** Only with the pool held, as the adopted volume's record is written (it reserves the room from then on). */
export async function releaseStagedReservation(layout: PoolLayout, moveKey: string): Promise<boolean> {
  return removeFile(layout.transferReservationFile(moveKey));
}

/** Where a pull stands on disk, for the workflow (adopt a done copy) and the orphan report; undefined: none. */
export async function transferStatus(
  layout: PoolLayout,
  moveKey: string,
): Promise<{ image: string; verifiedChunks: number; done: boolean } | undefined> {
  assertMoveKey(moveKey);
  const checkpoint = await readCheckpoint(layout, moveKey);
  const dir = await fs.lstat(layout.transferDir(moveKey)).catch(() => undefined);
  if (!dir) return undefined;
  return {
    image: layout.transferImage(moveKey),
    verifiedChunks: checkpoint?.verifiedChunks ?? 0,
    done: checkpoint?.done ?? false,
  };
}

/** A move's leftovers on one pool: a copy staged here (target) or an offer served from here (source). */
export interface PoolTransfer {
  moveKey: string;
  direction: 'in' | 'out';
  /** Space it holds on the pool (a staged copy's files; an offer's own file and a tree's archive, its snapshot apart). */
  bytesOnDisk: number;
  /** When it last changed (a pull's checkpoint, an offer's writing). */
  modifiedAt: string;
  /** In: the copy passed its final verification. Out: the snapshot the offer serves. */
  verified?: boolean;
  /** In: the pool capacity it holds for its adopt ("Room on the target"), until it is adopted or removed. */
  reservedBytes?: number;
  snapshotKey?: string;
}

/**
 * What transfers/ holds, for the orphan report: every staged copy and offer (their names only are trusted: a name
 * that is no move key is no leftover of this driver's). At most `limit` of them, in/ first; `more` if there are
 * others. Reads only.
 */
export async function listTransfers(
  layout: PoolLayout,
  limit: number,
): Promise<{ transfers: PoolTransfer[]; more: boolean }> {
  const names = async (dir: string) => (await fs.readdir(dir).catch(ignoreNotFound)) ?? [];
  const incoming = (await names(layout.transfersInDir)).filter(isVolumeKey).sort();
  const outgoing = (await names(layout.transfersOutDir)).flatMap((name) => keyOfJsonFileName(name) ?? []).sort();
  const transfers: PoolTransfer[] = [];
  for (const moveKey of incoming.slice(0, limit)) {
    const dir = layout.transferDir(moveKey);
    const files = await names(dir);
    const stats = await Promise.all(files.map((name) => fs.lstat(path.join(dir, name)).catch(() => undefined)));
    const modified = Math.max(0, ...stats.map((stat) => stat?.mtimeMs ?? 0));
    transfers.push({
      moveKey,
      direction: 'in',
      bytesOnDisk: stats.reduce((sum, stat) => sum + (stat ? stat.blocks * 512 : 0), 0),
      modifiedAt: new Date(modified).toISOString(),
      verified: (await readCheckpoint(layout, moveKey))?.done ?? false,
      reservedBytes: (await stagedReservation(layout, moveKey)) ?? 0,
    });
  }
  for (const moveKey of outgoing.slice(0, Math.max(0, limit - transfers.length))) {
    const file = layout.transferOfferFile(moveKey);
    const stat = await fs.lstat(file).catch(() => undefined);
    if (!stat) continue; // withdrawn meanwhile
    const offer = await readOffer(layout, moveKey).catch(() => undefined);
    const archive = await fs.lstat(layout.transferArchive(moveKey)).catch(() => undefined);
    transfers.push({
      moveKey,
      direction: 'out',
      bytesOnDisk: (stat.blocks + (archive?.blocks ?? 0)) * 512,
      modifiedAt: stat.mtime.toISOString(),
      ...(offer ? { snapshotKey: offer.snapshotKey } : {}),
    });
  }
  return { transfers, more: incoming.length + outgoing.length > limit };
}

function ignoreNotFound(error: unknown): undefined {
  if (isNotFound(error)) return undefined;
  throw error;
}

function checkPullSpec(spec: unknown): PullSpec {
  const { moveKey, source, offer } = jsonFields(spec);
  assertMoveKey(moveKey);
  const { host, port } = jsonFields(source);
  if (typeof host !== 'string' || host === '' || typeof port !== 'number' || !Number.isInteger(port)) {
    throw new DriverError(FailureType.InvalidArgument, `move ${moveKey}'s source must be a host and a port`);
  }
  if (port < 1 || port > 65535) throw new DriverError(FailureType.InvalidArgument, `port ${port} is not 1..65535`);
  const fields = jsonFields(offer);
  const { sizeBytes, chunkBytes, chunkCount, manifestDigest, sealedToken } = fields;
  const why =
    fields.moveKey !== moveKey
      ? `it is move ${JSON.stringify(fields.moveKey)}'s`
      : !isSize(sizeBytes) || chunkBytes !== CHUNK_BYTES || chunkCount !== chunkCountOf(sizeBytes)
        ? `its size, chunk size (${CHUNK_BYTES} bytes) and chunk count do not agree`
        : typeof manifestDigest !== 'string' || !DIGEST.test(manifestDigest)
          ? 'its manifest digest is not 64 hex digits'
          : typeof sealedToken !== 'string' || sealedToken.length > 1024
            ? 'it has no sealed token'
            : undefined;
  if (why !== undefined) {
    throw new DriverError(FailureType.InvalidArgument, `move ${moveKey}'s offer is not one to pull: ${why}`);
  }
  return { moveKey, source: { host, port }, offer: offer as TransferOffer };
}

async function readCheckpoint(layout: PoolLayout, moveKey: string): Promise<Checkpoint | undefined> {
  const value = await readJson(layout.transferCheckpointFile(moveKey)).catch(() => undefined);
  const { manifestDigest, verifiedChunks, done } = jsonFields(value);
  if (typeof manifestDigest !== 'string' || !isSize(verifiedChunks) || typeof done !== 'boolean') return undefined;
  return { manifestDigest, verifiedChunks, done };
}

/** One connection to the source, for one pull. */
class Channel {
  private constructor(
    private readonly socket: tls.TLSSocket,
    private readonly frames: FrameReader,
    readonly where: string,
  ) {}

  static async open(source: PullSpec['source'], moveKey: string, psk: Buffer, idleMs: number): Promise<Channel> {
    const where = `${source.host}:${source.port}`;
    const socket = tls.connect({
      host: source.host,
      port: source.port,
      ciphers: CIPHERS,
      minVersion: TLS_VERSION,
      maxVersion: TLS_VERSION,
      pskCallback: () => ({ psk, identity: moveKey }),
      // The PSK authenticates the source; there is no certificate to check.
      checkServerIdentity: () => undefined,
    });
    socket.setTimeout(idleMs, () =>
      socket.destroy(Object.assign(new Error(`nothing from the source for ${idleMs / 1000} s`), { code: 'ETIMEDOUT' })),
    );
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('secureConnect', resolve);
        socket.once('error', reject);
      });
    } catch (error) {
      socket.destroy();
      throw channelError(error, true, where, moveKey);
    }
    return new Channel(socket, new FrameReader(socket), where);
  }

  request(request: Record<string, unknown>): void {
    this.socket.write(`${JSON.stringify(request)}\n`);
  }

  /** The next answer's header: an error answer is thrown as what it says. */
  async answer(): Promise<Partial<Record<string, unknown>>> {
    const header = await this.frames.header();
    if (header === undefined) throw prematureClose('the source hung up');
    if (header.error !== undefined) {
      const type = isFailureType(header.error) ? header.error : FailureType.Internal;
      throw new DriverError(type, `the source at ${this.where} answered: ${String(header.message)}`);
    }
    return header;
  }

  bytes(length: number): Promise<Buffer> {
    return this.frames.bytes(length);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** The errors of a connection (not of a file): Node's and OpenSSL's codes. */
const NETWORK_CODES =
  /^(ERR_SSL_|ERR_TLS_|ERR_STREAM_PREMATURE_CLOSE$|ECONN|EPIPE$|ETIMEDOUT$|EHOSTUNREACH$|ENETUNREACH$|EAI_|ENOTFOUND$)/;

/**
 * What a failed connection means, said for the workflow: what failed, and whether to pull again. Any other error
 * (a DriverError, a file's) is answered as it is.
 */
function channelError(error: unknown, handshake: boolean, where: string, moveKey: string): unknown {
  const code = errorCode(error) ?? '';
  if (error instanceof DriverError || !NETWORK_CODES.test(code)) return error;
  if (code === 'ERR_SSL_TLSV1_ALERT_UNKNOWN_PSK_IDENTITY') {
    return new DriverError(
      FailureType.NotFound,
      `move ${moveKey} is not offered by the source at ${where}: it was withdrawn there (the move is done or ` +
        'cancelled), or that address is not the node that offered it',
    );
  }
  if (handshake && /BAD_RECORD_MAC|DECRYPT/.test(code)) {
    return new DriverError(
      FailureType.FailedPrecondition,
      `the source at ${where} refused move ${moveKey}'s token (the TLS handshake failed its check): it offered ` +
        'the move with another token (withdrawn and offered again since?); ask it for a new offer',
    );
  }
  const detail = error instanceof Error ? `${code}: ${error.message.split('\n')[0] ?? ''}` : code;
  const why =
    code === 'ECONNREFUSED'
      ? `nothing listens for copies at ${where} (the source's agent is down or restarting)`
      : /BAD_RECORD_MAC|DECRYPT/.test(code)
        ? `move ${moveKey}'s channel to ${where} was corrupted in transit and TLS refused it (${detail})`
        : `move ${moveKey}'s channel to ${where} broke (${detail})`;
  return new DriverError(FailureType.Unavailable, `${why}; pull again to resume from the checkpoint`);
}

class Pull {
  private readonly image: string;
  private readonly everyMs: number;
  private manifest!: TransferManifest;
  private channel?: Channel;
  private handle?: FileHandle;
  private lastCheckpoint = 0;
  private readonly result: PullResult;

  constructor(
    private readonly layout: PoolLayout,
    private readonly moveKey: string,
    private readonly source: PullSpec['source'],
    private readonly offer: TransferOffer,
    private readonly psk: Buffer,
    private readonly options: PullOptions,
  ) {
    this.image = layout.transferImage(moveKey);
    this.everyMs = options.checkpointEveryMs ?? 1000;
    this.result = {
      image: this.image,
      sizeBytes: offer.sizeBytes,
      chunkCount: offer.chunkCount,
      resumedFromChunk: 0,
      fetchedBytes: 0,
      fetchedChunks: 0,
      zeroChunks: 0,
      refetchedChunks: [],
    };
  }

  /**
   * Everything that can refuse the pull (the source, the manifest, the room) is asked before the pool is written
   * to: a refused pull leaves the pool as it was.
   */
  async run(): Promise<PullResult> {
    const { layout, moveKey, offer } = this;
    const dir = layout.transferDir(moveKey);
    let checkpoint = await readCheckpoint(layout, moveKey);
    if (checkpoint?.done && checkpoint.manifestDigest === offer.manifestDigest) {
      const staged = await fs.lstat(this.image).catch(() => undefined);
      if (staged?.isFile() && staged.size === offer.sizeBytes) {
        this.result.resumedFromChunk = offer.chunkCount;
        return this.result;
      }
    }
    const cancelled = () => this.channel?.destroy();
    this.options.signal?.addEventListener('abort', cancelled);
    try {
      const fetched = await this.loadManifest();
      if (checkpoint && checkpoint.manifestDigest !== offer.manifestDigest) {
        // A copy of another offer of this move (made again from a new point-in-time copy): no start for this one. The
        // reservation stays: it is of the move, not of this copy.
        for (const file of [layout.transferCheckpointFile(moveKey), layout.transferManifestFile(moveKey), this.image])
          await removeFile(file);
        checkpoint = undefined;
      }
      this.result.resumedFromChunk = Math.min(checkpoint?.verifiedChunks ?? 0, offer.chunkCount);
      await this.assertRoom();
      await makeDirs(layout, [layout.transfersDir, layout.transfersInDir, dir]);
      // Kept byte for byte: a restarted pull checks it against the digest again.
      if (fetched) await writeFileAtomic(layout.transferManifestFile(moveKey), fetched.toString('utf8'), 0o600);
      this.handle = await openInPool(
        this.image,
        fsConstants.O_RDWR | fsConstants.O_CREAT,
        `move ${moveKey}'s staged copy`,
        0o600,
      );
      if ((await this.handle.stat()).size !== offer.sizeBytes) await this.handle.truncate(offer.sizeBytes);
      await this.copy(this.result.resumedFromChunk);
      await this.verify();
      await this.writeCheckpoint(offer.chunkCount, true);
      return this.result;
    } catch (error) {
      if (this.options.signal?.aborted) {
        throw new DriverError(FailureType.Aborted, `the pull of move ${moveKey} was cancelled; its checkpoint is kept`);
      }
      throw channelError(error, false, `${this.source.host}:${this.source.port}`, moveKey);
    } finally {
      this.options.signal?.removeEventListener('abort', cancelled);
      this.channel?.destroy();
      await this.handle?.close();
    }
  }

  private async connect(): Promise<Channel> {
    if (this.options.signal?.aborted) throw new DriverError(FailureType.Aborted, 'cancelled');
    this.channel ??= await Channel.open(this.source, this.moveKey, this.psk, this.options.idleTimeoutMs ?? IDLE_MS);
    return this.channel;
  }

  /**
   * The manifest kept beside the copy, or the source's (then resolved, to be kept once the pool is written to);
   * either must hash to the offer's digest.
   */
  private async loadManifest(): Promise<Buffer | undefined> {
    const kept = await fs.readFile(this.layout.transferManifestFile(this.moveKey)).catch(() => undefined);
    let payload: Buffer | undefined = kept;
    if (payload === undefined || sha256(payload) !== this.offer.manifestDigest) {
      const channel = await this.connect();
      channel.request({ op: 'manifest' });
      const header = await channel.answer();
      const length = header.bytes;
      if (header.manifest !== true || !isSize(length) || length > 128 * this.offer.chunkCount + 1024) {
        throw new DriverError(FailureType.Internal, `the source at ${channel.where} sent no manifest`);
      }
      payload = await channel.bytes(length);
      if (sha256(payload) !== this.offer.manifestDigest) {
        throw new DriverError(
          FailureType.FailedPrecondition,
          `the manifest the source at ${channel.where} serves for move ${this.moveKey} does not match the offer's ` +
            'digest: the offer is of another copy than the one served; ask the source for a new offer',
        );
      }
    }
    const manifest = parseManifest(JSON.parse(payload.toString('utf8')) as unknown);
    if (!manifest || manifest.sizeBytes !== this.offer.sizeBytes) {
      throw new DriverError(FailureType.FailedPrecondition, `move ${this.moveKey}'s manifest does not match its offer`);
    }
    this.manifest = manifest;
    this.result.zeroChunks = manifest.chunks.filter((_, index) => isZeroChunk(manifest, index)).length;
    return payload === kept ? undefined : payload;
  }

  /** Room for the chunks still to land (zeros take none), counting what the staged copy already holds. */
  private async assertRoom(): Promise<void> {
    const { manifest } = this;
    let needed = 0;
    for (let index = this.result.resumedFromChunk; index < manifest.chunks.length; index++) {
      if (!isZeroChunk(manifest, index)) needed += chunkLength(manifest, index);
    }
    const stats = await fs.statfs(this.layout.root);
    const free = stats.bavail * stats.bsize;
    if (free < needed) {
      throw new DriverError(
        FailureType.ResourceExhausted,
        `pool ${this.layout.root} has ${free} bytes free; move ${this.moveKey}'s copy needs ${needed} more`,
      );
    }
  }

  /**
   * Every chunk from `from` on, checked as it lands; one that fails its checksum is asked for again after the
   * stream (CHUNK_ATTEMPTS in all). The checkpoint advances over the chunks verified without a gap.
   */
  private async copy(from: number): Promise<void> {
    const { manifest } = this;
    const count = manifest.chunks.length;
    const verified = new Uint8Array(count).fill(1, 0, from);
    for (let index = from; index < count; index++) if (isZeroChunk(manifest, index)) verified[index] = 1;
    const failures = new Map<number, number>();
    let prefix = from;
    let missing = Array.from({ length: count - from }, (_, offset) => from + offset).filter((i) => !verified[i]);
    let request: Record<string, unknown> = { op: 'chunks', from };
    while (missing.length > 0) {
      const asked = new Set(missing);
      const channel = await this.connect();
      channel.request(request);
      for (let header = await channel.answer(); header.end !== true; header = await channel.answer()) {
        const index = header.chunk;
        if (typeof index !== 'number' || !asked.has(index) || header.bytes !== chunkLength(manifest, index)) {
          throw new DriverError(FailureType.Internal, `the source at ${channel.where} sent an unasked chunk`);
        }
        const data = await channel.bytes(header.bytes);
        this.result.fetchedBytes += data.length;
        this.result.fetchedChunks += 1;
        if (sha256(data) !== manifest.chunks[index]) {
          failures.set(index, (failures.get(index) ?? 0) + 1);
          continue;
        }
        await this.writeChunk(index, data);
        verified[index] = 1;
        while (prefix < count && verified[prefix]) prefix++;
        if (Date.now() - this.lastCheckpoint >= this.everyMs) await this.writeCheckpoint(prefix, false);
      }
      missing = missing.filter((index) => !verified[index]);
      const hopeless = missing.find((index) => (failures.get(index) ?? 0) >= CHUNK_ATTEMPTS);
      if (hopeless !== undefined) {
        await this.writeCheckpoint(prefix, false);
        throw new DriverError(
          FailureType.Internal,
          `chunk ${hopeless} of move ${this.moveKey} failed its checksum ${CHUNK_ATTEMPTS} times: the source's copy ` +
            'no longer matches the manifest it offered (its disk changed it); offer the move again from a new ' +
            `point-in-time copy. The ${prefix} chunks before it are kept`,
        );
      }
      request = { op: 'chunks', only: missing.slice(0, MAX_ONLY) };
    }
    await this.writeCheckpoint(count, false);
  }

  /**
   * Reads the whole staged copy back and checks it against the manifest; a chunk found wrong is fetched (or zeroed)
   * again and read back once more. Only then is the copy done.
   */
  private async verify(): Promise<void> {
    // The read-back of a large copy outlasts either side's idle timeout: the connection is closed meanwhile, and a
    // new one opened only if a chunk must be fetched again.
    this.channel?.destroy();
    this.channel = undefined;
    const wrong = await this.check(this.manifest.chunks.map((_, index) => index));
    if (wrong.length === 0) return;
    this.result.refetchedChunks = wrong;
    for (const index of wrong.filter((i) => isZeroChunk(this.manifest, i))) {
      await this.writeChunk(index, ZERO.subarray(0, chunkLength(this.manifest, index)));
    }
    const fetch = wrong.filter((index) => !isZeroChunk(this.manifest, index));
    for (let at = 0; at < fetch.length; at += MAX_ONLY) {
      const batch = fetch.slice(at, at + MAX_ONLY);
      const asked = new Set(batch);
      const channel = await this.connect();
      channel.request({ op: 'chunks', only: batch });
      for (let header = await channel.answer(); header.end !== true; header = await channel.answer()) {
        const index = header.chunk;
        if (typeof index !== 'number' || !asked.has(index) || header.bytes !== chunkLength(this.manifest, index)) {
          throw new DriverError(FailureType.Internal, `the source at ${channel.where} sent an unasked chunk`);
        }
        const data = await channel.bytes(header.bytes);
        this.result.fetchedBytes += data.length;
        this.result.fetchedChunks += 1;
        await this.writeChunk(index, data); // checked below, as read back
      }
    }
    const still = await this.check(wrong);
    if (still.length > 0) {
      throw new DriverError(
        FailureType.Internal,
        `chunks ${still.join(', ')} of move ${this.moveKey}'s staged copy (${this.image}) read back wrong after ` +
          "they were fetched again: the target pool's disk does not keep what is written, or the source's copy changed",
      );
    }
  }

  /** The chunks among `indices` whose bytes on disk do not match the manifest. */
  private async check(indices: number[]): Promise<number[]> {
    const handle = this.handle as FileHandle;
    await handle.datasync();
    const wrong: number[] = [];
    let last = Date.now();
    for (const [done, index] of indices.entries()) {
      if (this.options.signal?.aborted) throw new DriverError(FailureType.Aborted, 'cancelled');
      const length = chunkLength(this.manifest, index);
      const data = await readChunk(handle, index * this.manifest.chunkBytes, length, this.image);
      if (chunkHash(data) !== this.manifest.chunks[index]) wrong.push(index);
      if (Date.now() - last >= Math.max(this.everyMs, 1000)) {
        last = Date.now();
        await this.options.onProgress?.({
          phase: 'verifying',
          chunks: done + 1,
          chunkCount: indices.length,
          fetchedBytes: this.result.fetchedBytes,
        });
      }
    }
    return wrong;
  }

  private async writeChunk(index: number, data: Buffer): Promise<void> {
    const handle = this.handle as FileHandle;
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await handle.write(data, done, data.length - done, index * CHUNK_BYTES + done);
      done += bytesWritten;
    }
  }

  /** The data first, then the claim: a checkpoint never names a chunk that a power cut could take back. */
  private async writeCheckpoint(verifiedChunks: number, done: boolean): Promise<void> {
    await (this.handle as FileHandle).datasync();
    const checkpoint: Checkpoint & { moveKey: string; chunkCount: number } = {
      moveKey: this.moveKey,
      manifestDigest: this.offer.manifestDigest,
      chunkCount: this.offer.chunkCount,
      verifiedChunks,
      done,
    };
    await writeJsonAtomic(this.layout.transferCheckpointFile(this.moveKey), checkpoint, 0o600);
    this.lastCheckpoint = Date.now();
    if (!done) {
      await this.options.onProgress?.({
        phase: 'copying',
        chunks: verifiedChunks,
        chunkCount: this.offer.chunkCount,
        fetchedBytes: this.result.fetchedBytes,
      });
    }
  }
}
