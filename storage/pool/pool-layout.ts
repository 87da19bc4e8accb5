/**
 * The pool directory: where everything lies in it, whose it is and who holds it.
 *
 * The layout is the only place that turns a volume key into a path. Keys are validated before any path is formed,
 * and every path is checked to lie inside the pool; names from the CO never reach a path.
 *
 *   <pool>/pool.json            identity, written once
 *   <pool>/.lock                pid of the agent that owns the pool
 *   <pool>/volumes/<key>/       the volume's data, given to users (dir)
 *   <pool>/volumes/<key>/disk.img   the volume's preallocated image, attached as a loop device (loop)
 *   <pool>/records/<key>.json   the volume's record (VolumeRecord without path)
 *   <pool>/journal/<key>.json   intent of an operation in progress
 *   <pool>/staging/<key>.json   where the volume is staged on this node, written before it is mounted
 *   <pool>/frozen/<key>.json    the volume's filesystem is being frozen for a copy; written before the freeze
 *   <pool>/snapshots/data/<key>/            a snapshot's copy of its volume's data (dir: the directory's content)
 *   <pool>/snapshots/data/<key>/disk.img    a snapshot's copy of its volume's image (loop)
 *   <pool>/snapshots/records/<key>.json     the snapshot's record (SnapshotRecord without path)
 *   <pool>/snapshots/journal/<key>.json     intent of a snapshot operation in progress
 *   <pool>/transfers/key.pem                this node's key for node-to-node copies (transfer.ts), written once
 *   <pool>/transfers/out/<key>.json         a copy this node offers to another node for a move, with its token
 *   <pool>/transfers/in/<key>/              a copy pulled from another node for a move: its image, manifest, checkpoint
 *
 * Snapshot and move keys have the form of volume keys and are checked the same way; they live in their own
 * directories, so a snapshot key or a move key never names a volume's file.
 */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import {
  errorCode,
  fsyncDir,
  isNotFound,
  isTempFileName,
  jsonFields,
  readFileIfExists,
  readJson,
  removeFile,
  writeFileOnce,
  writeJsonOnce,
} from '../host/files';

const VOLUME_KEY = /^[0-9a-f]{32}$/;
const JSON_FILE = /^([0-9a-f]{32})\.json$/;

export function isVolumeKey(key: unknown): key is string {
  return typeof key === 'string' && VOLUME_KEY.test(key);
}

export function assertVolumeKey(key: unknown): asserts key is string {
  assertKey(key, 'volume');
}

/** Snapshot keys have the form of volume keys. */
export function assertSnapshotKey(key: unknown): asserts key is string {
  assertKey(key, 'snapshot');
}

/** Move keys (a node-to-node copy's, storage/pool/transfer.ts) have the form of volume keys. */
export function assertMoveKey(key: unknown): asserts key is string {
  assertKey(key, 'move');
}

function assertKey(key: unknown, what: 'volume' | 'snapshot' | 'move'): asserts key is string {
  if (!isVolumeKey(key)) {
    const shown = typeof key === 'string' ? JSON.stringify(key.slice(0, 80)) : typeof key;
    throw new DriverError(FailureType.InvalidArgument, `${what} key ${shown} is not 32 lower-case hex digits`);
  }
}

/** The key a records/ or journal/ file name stands for; undefined for names this driver does not write. */
export function keyOfJsonFileName(name: string): string | undefined {
  return JSON_FILE.exec(name)?.[1];
}

/**
 * A directory of <key>.json files (journal/, staging/, ...): the entries `read` understands, in name order; every
 * other name (temporary files aside) is a stray, left alone.
 */
export async function readKeyedFiles<T>(
  dir: string,
  read: (key: string) => Promise<T | undefined>,
): Promise<{ entries: T[]; strays: string[] }> {
  const entries: T[] = [];
  const strays: string[] = [];
  for (const name of (await fs.readdir(dir)).sort()) {
    if (isTempFileName(name)) continue;
    const key = keyOfJsonFileName(name);
    const entry = key === undefined ? undefined : await read(key);
    if (entry) entries.push(entry);
    else strays.push(path.join(dir, name));
  }
  return { entries, strays };
}

export class PoolLayout {
  readonly root: string;
  readonly identityFile: string;
  readonly lockFile: string;
  /** Created and removed by each health check: whether the pool's filesystem takes a write (publishing.ts). */
  readonly writeProbeFile: string;
  readonly volumesDir: string;
  readonly recordsDir: string;
  readonly journalDir: string;
  readonly stagingDir: string;
  readonly frozenDir: string;
  readonly snapshotsDir: string;
  readonly snapshotDataDir: string;
  readonly snapshotRecordsDir: string;
  readonly snapshotJournalDir: string;
  readonly transfersDir: string;
  readonly transferKeyFile: string;
  readonly transfersOutDir: string;
  readonly transfersInDir: string;

  constructor(pool: string) {
    if (typeof pool !== 'string' || !path.isAbsolute(pool)) {
      throw new DriverError(FailureType.InvalidArgument, `pool path ${JSON.stringify(pool)} must be absolute`);
    }
    const root = path.resolve(pool);
    if (root === path.parse(root).root) {
      throw new DriverError(FailureType.InvalidArgument, `refusing to use the filesystem root ${root} as a pool`);
    }
    this.root = root;
    this.identityFile = path.join(root, 'pool.json');
    this.lockFile = path.join(root, '.lock');
    this.writeProbeFile = path.join(root, '.write-probe');
    this.volumesDir = path.join(root, 'volumes');
    this.recordsDir = path.join(root, 'records');
    this.journalDir = path.join(root, 'journal');
    this.stagingDir = path.join(root, 'staging');
    this.frozenDir = path.join(root, 'frozen');
    this.snapshotsDir = path.join(root, 'snapshots');
    this.snapshotDataDir = path.join(this.snapshotsDir, 'data');
    this.snapshotRecordsDir = path.join(this.snapshotsDir, 'records');
    this.snapshotJournalDir = path.join(this.snapshotsDir, 'journal');
    this.transfersDir = path.join(root, 'transfers');
    this.transferKeyFile = path.join(this.transfersDir, 'key.pem');
    this.transfersOutDir = path.join(this.transfersDir, 'out');
    this.transfersInDir = path.join(this.transfersDir, 'in');
  }

  volumeDir(key: string): string {
    return this.keyed(this.volumesDir, key, '');
  }

  volumeImage(key: string): string {
    return path.join(this.volumeDir(key), 'disk.img');
  }

  recordFile(key: string): string {
    return this.keyed(this.recordsDir, key, '.json');
  }

  intentFile(key: string): string {
    return this.keyed(this.journalDir, key, '.json');
  }

  stagingFile(key: string): string {
    return this.keyed(this.stagingDir, key, '.json');
  }

  freezeFile(key: string): string {
    return this.keyed(this.frozenDir, key, '.json');
  }

  snapshotDir(key: string): string {
    return this.keyed(this.snapshotDataDir, key, '', assertSnapshotKey);
  }

  snapshotImage(key: string): string {
    return path.join(this.snapshotDir(key), 'disk.img');
  }

  snapshotRecordFile(key: string): string {
    return this.keyed(this.snapshotRecordsDir, key, '.json', assertSnapshotKey);
  }

  snapshotIntentFile(key: string): string {
    return this.keyed(this.snapshotJournalDir, key, '.json', assertSnapshotKey);
  }

  transferOfferFile(key: string): string {
    return this.keyed(this.transfersOutDir, key, '.json', assertMoveKey);
  }

  /** A dir pool's offer serves this archive of its snapshot's tree (transfer.ts, TransferSource.offer). */
  transferArchive(key: string): string {
    return this.keyed(this.transfersOutDir, key, '.tar', assertMoveKey);
  }

  transferDir(key: string): string {
    return this.keyed(this.transfersInDir, key, '', assertMoveKey);
  }

  transferImage(key: string): string {
    return path.join(this.transferDir(key), 'disk.img');
  }

  transferManifestFile(key: string): string {
    return path.join(this.transferDir(key), 'manifest.json');
  }

  transferCheckpointFile(key: string): string {
    return path.join(this.transferDir(key), 'checkpoint.json');
  }

  /** What the staged copy holds of the pool's capacity until it is adopted or discarded (transfer.ts). */
  transferReservationFile(key: string): string {
    return path.join(this.transferDir(key), 'reserved.json');
  }

  /**
   * Makes every directory of the layout that is missing, durably (at open: the pool may be new). transfers/ is made
   * by the first copy that needs it (storage/pool/transfer.ts), so a pool that never moved a volume has none.
   */
  async createDirs(): Promise<void> {
    for (const dir of [this.volumesDir, this.recordsDir, this.journalDir, this.stagingDir, this.frozenDir]) {
      await fs.mkdir(dir, { recursive: true });
    }
    for (const dir of [this.snapshotDataDir, this.snapshotRecordsDir, this.snapshotJournalDir]) {
      await fs.mkdir(dir, { recursive: true });
    }
    await fsyncDir(this.snapshotsDir);
    await fsyncDir(this.root);
  }

  /** `<dir>/<key><suffix>`, once the key is checked; checked again to lie inside the pool (defence in depth). */
  private keyed(dir: string, key: string, suffix: string, check: (key: string) => void = assertVolumeKey): string {
    check(key);
    const candidate = path.join(dir, `${key}${suffix}`);
    const relative = path.relative(this.root, candidate);
    if (relative === '' || relative.split(path.sep)[0] === '..' || path.isAbsolute(relative)) {
      throw new DriverError(FailureType.Internal, `${candidate} is outside the pool ${this.root}`);
    }
    return candidate;
  }
}

/* <pool>/pool.json: the pool's UUID, written once so that a re-created pool is never mistaken for the old one. */

export interface PoolIdentity {
  poolId: string;
  /** ISO 8601. */
  createdAt: string;
  /** The backend kind that created the pool; another kind must not open it. */
  backend: string;
  /** The identity this pool replaced, when an operator accepted the replacement (agent/pool-gate.ts). */
  replaces?: string;
}

/** What to write when the pool has no identity yet. */
export interface NewIdentity {
  /** The identity the node's record remembered, named by the operator's decision; absent on a first start. */
  replaces?: string;
}

/**
 * Writes the identity if there is none (created: true), then checks it belongs to `backend`. A pool that has one
 * keeps it whatever `fresh` says: the file is written once, so a disk mounted in the meantime wins.
 */
export async function ensurePoolIdentity(
  layout: PoolLayout,
  backend: string,
  fresh: NewIdentity = {},
): Promise<{ identity: PoolIdentity; created: boolean }> {
  const made: PoolIdentity = { poolId: randomUUID(), createdAt: new Date().toISOString(), backend };
  if (fresh.replaces) made.replaces = fresh.replaces;
  const created = await writeJsonOnce(layout.identityFile, made);
  const identity = created ? made : await readIdentity(layout);
  if (!identity) throw new DriverError(FailureType.Internal, `${layout.identityFile} vanished while it was opened`);
  if (identity.backend !== backend) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `pool ${layout.root} belongs to the ${identity.backend} backend, not ${backend}`,
    );
  }
  return { identity, created };
}

/** The pool's identity; undefined when it has none yet (an empty directory, or a disk not mounted there). */
export async function readIdentity(layout: PoolLayout): Promise<PoolIdentity | undefined> {
  const file = layout.identityFile;
  const value = await readJson(file).catch((error: unknown) => {
    if (error instanceof DriverError) return null;
    throw error;
  });
  if (value === undefined) return undefined;
  const identity = jsonFields(value);
  const { poolId, createdAt, backend, replaces } = identity;
  if (typeof poolId !== 'string' || poolId === '' || typeof createdAt !== 'string' || typeof backend !== 'string') {
    throw new DriverError(FailureType.FailedPrecondition, `${file} is not a durable-csi pool identity`);
  }
  return { poolId, createdAt, backend, ...(typeof replaces === 'string' ? { replaces } : {}) };
}

/*
 * One agent process owns a pool. <pool>/.lock holds the owner's pid on its first line, then a token naming this
 * lock so that a release never removes a lock another process has since taken over. A lock whose pid is dead
 * is taken over, and so is one holding our own pid: the agent restarted in a fresh PID namespace, or this
 * process reopened the pool after a simulated crash.
 */

const ATTEMPTS = 5;

export interface PoolLock {
  /** Removes the lock file if it is still ours. */
  release(): Promise<void>;
}

/** The pid on the lock's first line; undefined for anything else (a lock nobody could have written). */
export function lockHolder(text: string): number | undefined {
  const first = text.split('\n')[0]?.trim() ?? '';
  const pid = /^\d{1,10}$/.test(first) ? Number(first) : 0;
  return pid > 0 ? pid : undefined;
}

export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return errorCode(error) === 'EPERM';
  }
}

export async function acquirePoolLock(layout: PoolLayout): Promise<PoolLock> {
  const file = layout.lockFile;
  const content = `${process.pid}\n${randomUUID()}\n`;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (await writeFileOnce(file, content)) return { release: () => releaseLock(file, content) };
    const seen = await readFileIfExists(file);
    if (seen === undefined) continue;
    const holder = lockHolder(seen);
    if (holder !== undefined && holder !== process.pid && isProcessAlive(holder)) {
      throw new DriverError(FailureType.FailedPrecondition, `pool ${layout.root} is in use by process ${holder}`);
    }
    await removeStaleLock(file, seen);
  }
  throw new DriverError(FailureType.Aborted, `could not lock pool ${layout.root}: other processes keep taking it`);
}

/**
 * Removes the lock only if it still holds what was judged stale: it is moved aside (atomically) and put back
 * if another process replaced it in the meantime, so two processes taking over a stale lock cannot both win.
 */
async function removeStaleLock(file: string, stale: string): Promise<void> {
  const aside = `${file}.stale-${randomUUID()}`;
  try {
    await fs.rename(file, aside);
  } catch (error) {
    if (isNotFound(error)) return;
    throw error;
  }
  try {
    if ((await fs.readFile(aside, 'utf8')) !== stale) await restoreLock(aside, file);
  } finally {
    await fs.rm(aside, { force: true });
  }
}

async function restoreLock(aside: string, file: string): Promise<void> {
  try {
    await fs.link(aside, file);
  } catch (error) {
    if (errorCode(error) !== 'EEXIST') throw error;
  }
}

async function releaseLock(file: string, content: string): Promise<void> {
  try {
    if ((await readFileIfExists(file)) === content) await removeFile(file);
  } catch (error) {
    // A pool whose filesystem turned read-only or failing (an error) keeps the file; the next open takes it over, its
    // pid being dead or this process's. Closing must not fail there: the operator unmounts the disk next, to repair it.
    if (errorCode(error) !== 'EROFS' && errorCode(error) !== 'EIO') throw error;
  }
}
