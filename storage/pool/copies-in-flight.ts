/**
 * The copies (snapshots, restores, clones) running outside the pool lock. A copy takes the lock to check and
 * journal its intent, copies without it (for minutes without reflinks: kubelet's calls on other volumes go on
 * meanwhile), and takes it again to write its record. While it copies, its source and its target are busy: every
 * call that would change, remove or read-then-change either is refused (Aborted, retryable) rather than racing it,
 * the journal settling leaves the copy's intent alone, and the bytes it will take stay reserved here.
 */
import { DriverError, FailureType } from '../../common/failures';
import type { StoredRecord } from './volume-records';

export type CopyEnd = { volumeKey: string } | { snapshotKey: string };

export interface CopyInFlight {
  /** What is read: a volume (snapshot, clone) or a snapshot (restore). */
  source: CopyEnd;
  /** What is written: a snapshot, or a new volume (whose record is kept here for the project IDs in use). */
  target: { snapshotKey: string; name: string } | { volumeKey: string; name: string; record: StoredRecord };
  /** What the target takes from the pool once recorded. */
  reservedBytes: number;
}

export class CopiesInFlight {
  private readonly copies = new Set<CopyInFlight>();

  /** Marks the copy as running; call the returned function once it is recorded or rolled back. */
  begin(copy: CopyInFlight): () => void {
    this.copies.add(copy);
    return () => void this.copies.delete(copy);
  }

  get reservedBytes(): number {
    let bytes = 0;
    for (const copy of this.copies) bytes += copy.reservedBytes;
    return bytes;
  }

  /** True while a copy reads or writes this volume. */
  volumeBusy(key: string): boolean {
    return this.find((end) => 'volumeKey' in end && end.volumeKey === key) !== undefined;
  }

  /** True while a copy reads or writes this snapshot. */
  snapshotBusy(key: string): boolean {
    return this.find((end) => 'snapshotKey' in end && end.snapshotKey === key) !== undefined;
  }

  /** The records of the volumes being made by a copy (not in the pool's index until they are written). */
  targetRecords(): StoredRecord[] {
    return [...this.copies].flatMap((copy) => ('record' in copy.target ? [copy.target.record] : []));
  }

  /** Aborted while a copy reads or writes the volume, or makes one of that name; `doing` names the refused call. */
  assertVolumeFree(key: string, doing: string, name?: string): void {
    const copy = this.find(
      (end) =>
        'volumeKey' in end && (end.volumeKey === key || (name !== undefined && 'name' in end && end.name === name)),
    );
    if (copy) throw busy(`volume ${key}`, doing, copy);
  }

  /** Aborted while a copy reads or writes the snapshot, or makes one of that name. */
  assertSnapshotFree(key: string, doing: string, name?: string): void {
    const copy = this.find(
      (end) =>
        'snapshotKey' in end && (end.snapshotKey === key || (name !== undefined && 'name' in end && end.name === name)),
    );
    if (copy) throw busy(`snapshot ${key}`, doing, copy);
  }

  private find(matches: (end: CopyEnd | CopyInFlight['target']) => boolean): CopyInFlight | undefined {
    return [...this.copies].find((copy) => matches(copy.source) || matches(copy.target));
  }
}

function busy(what: string, doing: string, copy: CopyInFlight): DriverError {
  return new DriverError(
    FailureType.Aborted,
    `cannot ${doing}: ${what} is part of a copy in progress (${describeEnd(copy.source)} to ` +
      `${describeEnd(copy.target)}); try again when it is done`,
  );
}

function describeEnd(end: CopyEnd): string {
  return 'volumeKey' in end ? `volume ${end.volumeKey}` : `snapshot ${end.snapshotKey}`;
}
