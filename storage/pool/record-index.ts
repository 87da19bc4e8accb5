/**
 * The pool's records in memory, so a create, expand or status costs the same with 1,000 volumes as with none.
 * Only the process holding the pool lock writes records, and it updates the index after each write; the disk
 * stays the truth: the index is read from it after open() and again whenever a change failed part way.
 */
import { listIntents } from './journal';
import { KeyedIndex } from './keyed-index';
import type { PoolLayout } from './pool-layout';
import { reserved } from './volume-compat';
import { listRecords } from './volume-records';
import type { StoredRecord } from './volume-records';

export class RecordIndex extends KeyedIndex<StoredRecord> {
  private readonly keysByName = new Map<string, Set<string>>();

  /** `inFlight`: keys whose intents a copy in progress reserves itself. */
  static async load(
    layout: PoolLayout,
    bytesOf: (capacityBytes: number) => number,
    inFlight: (key: string) => boolean = () => false,
  ): Promise<RecordIndex> {
    const records = await listRecords(layout);
    const intents = (await listIntents(layout)).intents.filter((intent) => !inFlight(intent.key));
    const index = new RecordIndex(bytesOf, reserved(records, intents, bytesOf) - reserved(records, [], bytesOf));
    for (const record of records) index.put(record);
    return index;
  }

  protected sizeOf(record: StoredRecord): number {
    return record.capacityBytes;
  }

  /** Two records share a name only if put there by hand; the lowest key wins, as in a scan sorted by key. */
  byName(name: string): StoredRecord | undefined {
    const [first] = [...(this.keysByName.get(name) ?? [])].sort();
    return first === undefined ? undefined : this.byKey.get(first);
  }

  protected override added(record: StoredRecord): void {
    const keys = this.keysByName.get(record.name) ?? new Set<string>();
    this.keysByName.set(record.name, keys.add(record.key));
  }

  protected override removed(record: StoredRecord): void {
    const keys = this.keysByName.get(record.name);
    keys?.delete(record.key);
    if (keys?.size === 0) this.keysByName.delete(record.name);
  }
}
