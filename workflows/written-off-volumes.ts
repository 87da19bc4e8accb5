import {
  ActivityFailure,
  CancellationScope,
  condition,
  isCancellation,
  log,
  proxyActivities,
  setCurrentDetails,
} from '@temporalio/workflow';
import { RetryState } from '@temporalio/common';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities } from '../activities/node-activities';
import { deleteOptions } from './node-work';
import { type WrittenOffVolume, ownsVolume, poolIdPrefix } from '../common/names';

/** A volume and a snapshot copy are different things on the pool. */
const kindKey = (volume: WrittenOffVolume) => `${volume.kind ?? 'volume'}/${volume.key}`;
const identity = (volume: WrittenOffVolume) => `${kindKey(volume)}/${volume.poolIdPrefix}`;

/** Deletions in flight at once: bounded, so a node that returns to thousands of write-offs is not flooded. */
const BATCH = 16;
/** Attempts of one deletion in one round (about 3 s of backoff between them). */
const ATTEMPTS_PER_ROUND = 3;
/** How long the record waits between rounds for deletions that keep failing. */
const RETRY_EVERY = '30s';
/** A round's outcome for a deletion refused retryably every time: it stays on the list. */
const STILL_FAILING = 'still-failing';

export interface CleanerDeps {
  driverName: string;
  nodeId: string;
  kept: WrittenOffVolume[];
  /** The count still to delete changed. */
  onChange(pending: number): void;
}

/**
 * The volumes (and snapshot copies) a node's record keeps because their deletions were answered "node-forgotten"
 * while nothing could delete them (the CO was told they are gone). When the node returns with the pool they were
 * issued on, the record deletes them there for real, on the node's own queue (durable: the tasks wait there while
 * the agent is away). A node back with another pool never held them any more: they are dropped. The list lives in
 * the record's workflow state and its continue-as-new input, never in its memo (only a count is shown there).
 *
 * The record tries each deletion a few times before the node turns live; those that keep failing stay on the list
 * (counted in the memo, named in the record's details, logged) and are tried again every RETRY_EVERY beside the live
 * node until they are deleted or definitely refused. Nothing is dropped for failing: a write-off leaves the list
 * only once the node answered it (deleted, absent, pool replaced, or refused for good).
 */
export class WrittenOffCleaner {
  private kept: WrittenOffVolume[];
  private readonly onNode;
  private readonly control = proxyActivities<ControlActivities>({
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 5 },
  });
  // Rounds run in a cancellation scope of their own, so `stop` gives them up at once (their attempts may wait for an
  // agent that is away), the list kept for the next round or run.
  private draining: Promise<void> | undefined;
  private stopping = false;
  private added = false;
  private scope: CancellationScope | undefined;

  constructor(private readonly deps: CleanerDeps) {
    this.kept = [...deps.kept];
    const summary = `delete volumes written off while ${deps.nodeId} was forgotten`;
    const options = deleteOptions(deps.driverName, deps.nodeId, summary);
    this.onNode = proxyActivities<NodeActivities>({
      ...options,
      retry: { ...options.retry, maximumAttempts: ATTEMPTS_PER_ROUND },
    });
  }

  add(volume: WrittenOffVolume): void {
    if (this.kept.some((known) => identity(known) === identity(volume))) return;
    this.kept.push(volume);
    this.added = true;
    this.deps.onChange(this.kept.length);
  }

  pending(): WrittenOffVolume[] {
    return [...this.kept];
  }

  /**
   * Before the node turns live: one round of bounded attempts at every kept volume on the node (pool `poolId`);
   * what kept failing is still pending. It replaces the rounds of an earlier live period (their attempts wait for
   * the agent).
   */
  async drain(poolId: string): Promise<void> {
    await this.stop();
    await this.start(() => this.round(poolId));
  }

  /** Rounds until the list is empty, started without waiting (the node is live and serving meanwhile). */
  drainInBackground(poolId: string): void {
    if (this.draining) return; // a round in flight tries what was added; the rounds' wait ends early for it
    void this.start(() => this.rounds(poolId));
  }

  /** Resolves once no round is in flight (rounds still to come are given up, the list kept). */
  settled(): Promise<void> {
    return this.stop();
  }

  private async deleteOne(volume: WrittenOffVolume, poolId: string): Promise<string> {
    // A create's allocation may be on whatever pool the node has now (see WrittenOffVolume.anyPool). `writtenOff`
    // tells the agent the key is the CO's no more: it must not hand it to a create of the same name meanwhile.
    const prefix = volume.anyPool ? poolIdPrefix(poolId) : volume.poolIdPrefix;
    const where = { key: volume.key, poolIdPrefix: prefix, writtenOff: true as const };
    try {
      return volume.kind === 'snapshot'
        ? await this.onNode.deleteSnapshotOnNode(where)
        : await this.onNode.deleteVolumeOnNode(where);
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      if (isCancellation(error)) return STILL_FAILING; // the round was given up: kept for the next
      if (error.retryState === RetryState.MAXIMUM_ATTEMPTS_REACHED) {
        log.warn('a written-off volume could not be deleted yet; the record tries again', {
          ...volume,
          error: String(error.cause ?? error),
        });
        return STILL_FAILING;
      }
      // A definite refusal: left on the pool, where the orphan report shows it (no PV, no pending operation).
      log.warn('a written-off volume could not be deleted; see the orphan report', { ...volume, error: String(error) });
      return 'refused';
    }
  }

  /** Drops what was on another pool; true when something is left to delete. */
  private dropOtherPools(poolId: string): boolean {
    const held = (volume: WrittenOffVolume) => volume.anyPool === true || ownsVolume(poolId, volume.poolIdPrefix);
    const gone = this.kept.filter((volume) => !held(volume));
    if (gone.length > 0) {
      log.info('written-off volumes were on a pool this node no longer has: nothing to delete', {
        nodeId: this.deps.nodeId,
        volumeIds: gone.map((volume) => volume.volumeId),
      });
      this.kept = this.kept.filter(held);
      this.deps.onChange(this.kept.length);
    }
    return this.kept.length > 0;
  }

  /** Deletes `batch` and takes off the list what the node answered; returns how many kept failing. */
  private async deleteBatch(batch: WrittenOffVolume[], poolId: string): Promise<number> {
    const outcomes = await Promise.all(batch.map((volume) => this.deleteOne(volume, poolId)));
    const answered = batch.flatMap((volume, index) => {
      const outcome = outcomes[index] ?? 'refused';
      return outcome === STILL_FAILING ? [] : [{ ...volume, outcome }];
    });
    if (answered.length > 0) {
      const { driverName, nodeId } = this.deps;
      try {
        await this.control.reportWrittenOffDeleted({ driverName, nodeId, volumes: answered });
      } catch (error) {
        if (!(error instanceof ActivityFailure)) throw error; // an Event is a report, not the decision
      }
    }
    const done = new Set(answered.map(kindKey));
    this.kept = this.kept.filter((volume) => !done.has(kindKey(volume)));
    this.deps.onChange(this.kept.length);
    return batch.length - answered.length;
  }

  /** One round, every kept volume tried once (what is added meanwhile included); returns how many failed. */
  private async round(poolId: string): Promise<number> {
    if (!this.dropOtherPools(poolId)) {
      this.showStuck(0);
      return 0;
    }
    const tried = new Set<string>();
    let failing = 0;
    for (;;) {
      const batch = this.kept.filter((volume) => !tried.has(kindKey(volume))).slice(0, BATCH);
      if (batch.length === 0) break;
      batch.forEach((volume) => tried.add(kindKey(volume)));
      failing += await this.deleteBatch(batch, poolId);
    }
    this.showStuck(failing);
    return failing;
  }

  /** Operators see it in the record's details (Temporal UI, `temporal workflow describe`) as well as the memo. */
  private showStuck(failing: number): void {
    setCurrentDetails(
      failing === 0
        ? ''
        : `${failing} written-off volume(s) or snapshot(s) could not be deleted on node ${this.deps.nodeId} yet ` +
            `(see the failures of its deleteVolumeOnNode and deleteSnapshotOnNode activities); tried again every ${RETRY_EVERY}`,
    );
  }

  private async rounds(poolId: string): Promise<void> {
    while (!this.stopping && this.kept.length > 0) {
      this.added = false; // what is added from here on is tried by this round or wakes the wait after it
      if ((await this.round(poolId)) === 0) continue;
      await condition(() => this.stopping || this.added, RETRY_EVERY);
      this.added = false;
    }
  }

  private start(work: () => Promise<unknown>): Promise<void> {
    const current = new CancellationScope();
    this.scope = current;
    const running: Promise<void> = current
      .run(work)
      .then(
        () => undefined,
        (error: unknown) => {
          if (!isCancellation(error)) throw error;
        },
      )
      .finally(() => {
        if (this.draining === running) this.draining = undefined;
      });
    this.draining = running;
    return running;
  }

  private async stop(): Promise<void> {
    this.stopping = true;
    this.scope?.cancel();
    await this.draining;
    this.stopping = false;
  }
}
