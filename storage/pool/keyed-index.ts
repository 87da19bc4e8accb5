/**
 * What the pool's in-memory indexes share (record-index.ts for volumes, snapshots.ts for snapshots): entries by
 * key and the bytes they reserve, plus what the journal still reserves for creates in progress (fixed: settling the
 * journal drops the index).
 */
export abstract class KeyedIndex<T extends { key: string }> {
  protected readonly byKey = new Map<string, T>();
  private entryBytes = 0;

  protected constructor(
    private readonly bytesOf: (size: number) => number,
    private readonly pendingBytes: number,
  ) {}

  /** The size an entry reserves before bytesOf (a volume's capacity, a snapshot's size). */
  protected abstract sizeOf(entry: T): number;
  /** After an entry was added or replaced; for what a subclass keeps besides. */
  protected added(_entry: T): void {}
  /** After an entry was removed. */
  protected removed(_entry: T): void {}

  get size(): number {
    return this.byKey.size;
  }

  /** The entries and the creates still in the journal, by what each takes from the pool. */
  get reservedBytes(): number {
    return this.entryBytes + this.pendingBytes;
  }

  get(key: string): T | undefined {
    return this.byKey.get(key);
  }

  /** After the entry's record was written (a new one, or a new size). */
  put(entry: T): void {
    this.remove(entry.key);
    this.byKey.set(entry.key, entry);
    this.entryBytes += this.bytesOf(this.sizeOf(entry));
    this.added(entry);
  }

  /** After the entry's record was removed. */
  remove(key: string): void {
    const entry = this.byKey.get(key);
    if (!entry) return;
    this.byKey.delete(key);
    this.entryBytes -= this.bytesOf(this.sizeOf(entry));
    this.removed(entry);
  }
}
