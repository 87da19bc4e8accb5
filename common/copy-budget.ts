/**
 * How long one copy of a volume (a snapshot, a restore, a clone) may take: a floor for the fixed costs (starting cp,
 * the fsync after it, a freeze) plus the volume's size at a rate every disk a pool lies on sustains. A copy that
 * runs past it is killed and its attempt fails, retryably: the next attempt starts again from scratch. Pure: the
 * workflows read COPY_TIME_CEILING_MS from here for the activities' start-to-close timeout, the node agent computes
 * each copy's budget with copyTimeMs.
 */

export interface CopyBudget {
  /** What every copy gets whatever its size. */
  floorMs: number;
  /** The rate counted for the size; conservative: a plain (not reflinked) copy on a busy spinning disk. */
  bytesPerSecond: number;
}

/** 2 minutes plus 20 MiB/s: a 10 GiB volume gets about 10.5 minutes, a 100 GiB one about 87. */
export const DEFAULT_COPY_BUDGET: CopyBudget = { floorMs: 2 * 60_000, bytesPerSecond: 20 * 1024 ** 2 };

/**
 * No copy gets more than this: the node activities that copy have it as their start-to-close timeout (plus
 * COPY_TIME_MARGIN_MS), since a workflow does not know the size of a snapshot's source. At the default rate it
 * covers about 1.6 TiB; a larger volume on a pool without reflinks needs a faster rate (--copy-rate).
 */
export const COPY_TIME_CEILING_MS = 24 * 3_600_000;

/** What the activity allows beyond the copy: the steps before and after it under the pool lock. */
export const COPY_TIME_MARGIN_MS = 10 * 60_000;

/** The budget of one copy of `bytes`, at most the ceiling. */
export function copyTimeMs(bytes: number, budget: CopyBudget = DEFAULT_COPY_BUDGET): number {
  return Math.min(COPY_TIME_CEILING_MS, Math.ceil(budget.floorMs + (bytes / budget.bytesPerSecond) * 1000));
}
