import type { Client } from '@temporalio/client';
import type { NodeRecordView } from '../node-records/reads';
import { listNodeRecords, readNodeRecord } from '../node-records/reads';

/**
 * Node records as placement reads them, shared by the creates running in this controller for a moment. A burst
 * of creates otherwise describes the same few records (or queries visibility) once each; the figures in a
 * record are only as fresh as the node's last heartbeat (10 s) anyway, and placement is a choice, not a promise:
 * the node's own pool accepts or refuses the volume. A missing record is never kept (a node that registers
 * now is seen by the next create), and neither is a failed read.
 */
export class PlacementReads {
  private readonly records = new Map<string, Cached<NodeRecordView | undefined>>();
  private sample: Cached<NodeRecordView[]> | undefined;
  private recent: Cached<NodeRecordView[]> | undefined;

  constructor(
    private readonly source: RecordSource,
    private readonly maxAgeMs = PLACEMENT_READ_MAX_AGE_MS,
  ) {}

  static fromTemporal(client: Client, driverName: string): PlacementReads {
    return new PlacementReads({
      record: (nodeId) => readNodeRecord(client, driverName, nodeId),
      liveSample: (limit) => listNodeRecords(client, driverName, { phase: 'live', limit }),
      recentSample: (limit) => listNodeRecords(client, driverName, { limit }),
    });
  }

  /** The node's record, read at most `maxAgeMs` ago; undefined when it has none. */
  record(nodeId: string): Promise<NodeRecordView | undefined> {
    this.forgetExpired();
    const cached = this.records.get(nodeId);
    if (cached && fresh(cached, this.maxAgeMs)) return cached.value;
    const entry = this.remember(this.source.record(nodeId), (view) => view === undefined);
    entry.forget = () => this.records.get(nodeId) === entry && this.records.delete(nodeId);
    this.records.set(nodeId, entry);
    return entry.value;
  }

  /** Up to `limit` live records from visibility, listed at most `maxAgeMs` ago. */
  liveSample(limit: number): Promise<NodeRecordView[]> {
    if (this.sample && fresh(this.sample, this.maxAgeMs)) return this.sample.value;
    const entry = this.remember(this.source.liveSample(limit));
    entry.forget = () => this.sample === entry && (this.sample = undefined);
    this.sample = entry;
    return entry.value;
  }

  /** Up to `limit` records of any phase from visibility (the most recently started first), listed at most `maxAgeMs` ago. */
  recentSample(limit: number): Promise<NodeRecordView[]> {
    if (this.recent && fresh(this.recent, this.maxAgeMs)) return this.recent.value;
    const entry = this.remember(this.source.recentSample(limit));
    entry.forget = () => this.recent === entry && (this.recent = undefined);
    this.recent = entry;
    return entry.value;
  }

  /** Until it settles, callers share the read in flight; its age counts from when it settled. */
  private remember<T>(read: Promise<T>, notWorthKeeping: (value: T) => boolean = () => false): Cached<T> {
    const entry: Cached<T> = { value: read, settledAt: undefined, forget: () => undefined };
    read.then(
      (value) => {
        entry.settledAt = Date.now();
        if (notWorthKeeping(value)) entry.forget();
      },
      () => entry.forget(),
    );
    return entry;
  }

  /** Bounds the map on a large cluster: entries older than their age limit go when the next read comes. */
  private forgetExpired(): void {
    if (this.records.size < EXPIRY_SWEEP_SIZE) return;
    for (const [nodeId, entry] of this.records) if (!fresh(entry, this.maxAgeMs)) this.records.delete(nodeId);
  }
}

/** Where records come from: DescribeWorkflowExecution of one record, visibility listings of live or any records. */
export interface RecordSource {
  record(nodeId: string): Promise<NodeRecordView | undefined>;
  liveSample(limit: number): Promise<NodeRecordView[]>;
  recentSample(limit: number): Promise<NodeRecordView[]>;
}

/** How long placement reuses a record it read; well under the records' heartbeat interval (10 s). */
export const PLACEMENT_READ_MAX_AGE_MS = 1_000;
const EXPIRY_SWEEP_SIZE = 1_024;

interface Cached<T> {
  value: Promise<T>;
  settledAt: number | undefined;
  forget: () => unknown;
}

function fresh(entry: Cached<unknown>, maxAgeMs: number): boolean {
  return entry.settledAt === undefined || Date.now() - entry.settledAt < maxAgeMs;
}
