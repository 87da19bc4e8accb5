/**
 * The pool's volumes and snapshots in memory (record-index.ts, snapshots.ts) and the bytes they reserve. Each index
 * is read from disk on first use and dropped whenever the disk may have moved under it: at open, after a change that
 * failed part way, after settling the journals finished anything.
 */
import type { CopiesInFlight } from './copies-in-flight';
import type { PoolLayout } from './pool-layout';
import { RecordIndex } from './record-index';
import { settleJournal, thawFrozen } from './reconcile';
import type { Reconciled, Release } from './reconcile';
import { SnapshotIndex, settleSnapshotJournal } from './snapshots';

export class PoolIndexes {
  private volumeIndex: RecordIndex | undefined;
  private snapshotIndex: SnapshotIndex | undefined;

  /**
   * `bytesOf` is what a volume or snapshot of that size takes from the pool; `release` settles a volume intent.
   * The intents of `copies` are theirs: neither settled here nor counted by the indexes (the copies count them).
   */
  constructor(
    private readonly layout: PoolLayout,
    private readonly bytesOf: (size: number) => number,
    private readonly release: Release,
    private readonly copies: CopiesInFlight,
  ) {}

  async records(): Promise<RecordIndex> {
    this.volumeIndex ??= await RecordIndex.load(this.layout, this.bytesOf, (key) => this.copies.volumeBusy(key));
    return this.volumeIndex;
  }

  async snapshots(): Promise<SnapshotIndex> {
    this.snapshotIndex ??= await SnapshotIndex.load(this.layout, this.bytesOf, (key) => this.copies.snapshotBusy(key));
    return this.snapshotIndex;
  }

  /** Volumes, snapshots, the creates of either still in the journals, and the copies in flight. */
  async reservedBytes(): Promise<number> {
    return (await this.records()).reservedBytes + (await this.snapshots()).reservedBytes + this.copies.reservedBytes;
  }

  /** Runs a step that changes the pool on disk: should it fail part way, the indexes are read again next time. */
  async changing<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      this.drop();
      throw error;
    }
  }

  /**
   * Settles what earlier calls left in the journals, and thaws what a failed thaw left frozen (before any retry);
   * the copies in flight keep theirs. Anything settled changed records, so the indexes are reread.
   */
  async settle(): Promise<{ reconciled: Reconciled[]; strays: string[] }> {
    const { copies } = this;
    await thawFrozen(this.layout, (key) => copies.volumeBusy(key));
    const volumes = await this.changing(() =>
      settleJournal(this.layout, this.release, (key) => copies.volumeBusy(key)),
    );
    const snapshots = await this.changing(() => settleSnapshotJournal(this.layout, (key) => copies.snapshotBusy(key)));
    if (volumes.reconciled.length > 0) this.volumeIndex = undefined;
    if (snapshots.reconciled.length > 0) this.snapshotIndex = undefined;
    return {
      reconciled: [...volumes.reconciled, ...snapshots.reconciled],
      strays: [...volumes.strays, ...snapshots.strays],
    };
  }

  /** Both indexes are read from disk on their next use. */
  drop(): void {
    this.volumeIndex = undefined;
    this.snapshotIndex = undefined;
  }

  /** After a volume's record was removed; an index not read since it was dropped stays unread. */
  removeVolume(key: string): void {
    this.volumeIndex?.remove(key);
  }

  /** After a snapshot's record was removed; as removeVolume. */
  removeSnapshot(key: string): void {
    this.snapshotIndex?.remove(key);
  }
}
