/**
 * The only place that turns a volume key into a path. Keys are validated before any path is formed, and every
 * path is checked to lie inside the pool; names from the CO never reach a path.
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
 *
 * Snapshot keys have the form of volume keys and are checked the same way; they live in their own directories,
 * so a snapshot key never names a volume's file.
 */
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';

const VOLUME_KEY = /^[0-9a-f]{32}$/;
const JSON_FILE = /^([0-9a-f]{32})\.json$/;

export function isVolumeKey(key: unknown): key is string {
  return typeof key === 'string' && VOLUME_KEY.test(key);
}

export function assertVolumeKey(key: unknown): asserts key is string {
  if (!isVolumeKey(key)) {
    const shown = typeof key === 'string' ? JSON.stringify(key.slice(0, 80)) : typeof key;
    throw new DriverError(FailureType.InvalidArgument, `volume key ${shown} is not 32 lower-case hex digits`);
  }
}

export function assertSnapshotKey(key: unknown): asserts key is string {
  if (!isVolumeKey(key)) {
    const shown = typeof key === 'string' ? JSON.stringify(key.slice(0, 80)) : typeof key;
    throw new DriverError(FailureType.InvalidArgument, `snapshot key ${shown} is not 32 lower-case hex digits`);
  }
}

/** The key a records/ or journal/ file name stands for; undefined for names this driver does not write. */
export function keyOfJsonFileName(name: string): string | undefined {
  return JSON_FILE.exec(name)?.[1];
}

export class PoolLayout {
  readonly root: string;

  constructor(pool: string) {
    if (typeof pool !== 'string' || !path.isAbsolute(pool)) {
      throw new DriverError(FailureType.InvalidArgument, `pool path ${JSON.stringify(pool)} must be absolute`);
    }
    const root = path.resolve(pool);
    if (root === path.parse(root).root) {
      throw new DriverError(FailureType.InvalidArgument, `refusing to use the filesystem root ${root} as a pool`);
    }
    this.root = root;
  }

  get identityFile(): string {
    return path.join(this.root, 'pool.json');
  }

  get lockFile(): string {
    return path.join(this.root, '.lock');
  }

  get volumesDir(): string {
    return path.join(this.root, 'volumes');
  }

  get recordsDir(): string {
    return path.join(this.root, 'records');
  }

  get journalDir(): string {
    return path.join(this.root, 'journal');
  }

  get stagingDir(): string {
    return path.join(this.root, 'staging');
  }

  get frozenDir(): string {
    return path.join(this.root, 'frozen');
  }

  get snapshotsDir(): string {
    return path.join(this.root, 'snapshots');
  }

  get snapshotDataDir(): string {
    return path.join(this.snapshotsDir, 'data');
  }

  get snapshotRecordsDir(): string {
    return path.join(this.snapshotsDir, 'records');
  }

  get snapshotJournalDir(): string {
    return path.join(this.snapshotsDir, 'journal');
  }

  snapshotDir(key: string): string {
    assertSnapshotKey(key);
    return this.inside(path.join(this.snapshotDataDir, key));
  }

  snapshotImage(key: string): string {
    return path.join(this.snapshotDir(key), 'disk.img');
  }

  snapshotRecordFile(key: string): string {
    assertSnapshotKey(key);
    return this.inside(path.join(this.snapshotRecordsDir, `${key}.json`));
  }

  snapshotIntentFile(key: string): string {
    assertSnapshotKey(key);
    return this.inside(path.join(this.snapshotJournalDir, `${key}.json`));
  }

  volumeDir(key: string): string {
    assertVolumeKey(key);
    return this.inside(path.join(this.volumesDir, key));
  }

  recordFile(key: string): string {
    assertVolumeKey(key);
    return this.inside(path.join(this.recordsDir, `${key}.json`));
  }

  intentFile(key: string): string {
    assertVolumeKey(key);
    return this.inside(path.join(this.journalDir, `${key}.json`));
  }

  stagingFile(key: string): string {
    assertVolumeKey(key);
    return this.inside(path.join(this.stagingDir, `${key}.json`));
  }

  freezeFile(key: string): string {
    assertVolumeKey(key);
    return this.inside(path.join(this.frozenDir, `${key}.json`));
  }

  volumeImage(key: string): string {
    return path.join(this.volumeDir(key), 'disk.img');
  }

  /** Defence in depth: the key check already rules this out. */
  private inside(candidate: string): string {
    const relative = path.relative(this.root, candidate);
    if (relative === '' || relative.split(path.sep)[0] === '..' || path.isAbsolute(relative)) {
      throw new DriverError(FailureType.Internal, `${candidate} is outside the pool ${this.root}`);
    }
    return candidate;
  }
}
