import { ActivityFailure, log, proxyActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities } from '../activities/node-activities';
import { deleteOptions } from './node-activity-options';
import type { WrittenOffVolume } from '../node-records/types';
import { ownsVolume, poolIdPrefix } from '../common/volume-id';

/**
 * The volumes (and snapshot copies) a node's record keeps because their deletions were answered "node-forgotten" while nothing could
 * delete them (the CO was told they are gone). When the node returns with the pool they were issued on, the
 * record deletes them there for real, on the node's own queue (durable: the tasks wait there while the agent is
 * away). A node back with another pool never held them any more: they are dropped. The list lives in the
 * record's workflow state and its continue-as-new input, never in its memo (only a count is shown there).
 */
export interface WrittenOffCleaner {
  add(volume: WrittenOffVolume): void;
  pending(): WrittenOffVolume[];
  /** Deletes every kept volume on the node (pool `poolId`); resolves when the list is empty. */
  drain(poolId: string): Promise<void>;
  /** The same, started without waiting (the node is live and serving meanwhile). */
  drainInBackground(poolId: string): void;
  /** Resolves once no drain is in flight. */
  settled(): Promise<void>;
}

/**
 * A volume and a snapshot copy are different things on the pool. For volumes these are the comparisons of the
 * releases before snapshots (a batch's keys are done whatever their pool), so their histories replay unchanged.
 */
const kindKey = (volume: WrittenOffVolume) => `${volume.kind ?? 'volume'}/${volume.key}`;
const identity = (volume: WrittenOffVolume) => `${kindKey(volume)}/${volume.poolIdPrefix}`;

/** Deletions in flight at once: bounded, so a node that returns to thousands of write-offs is not flooded. */
const BATCH = 16;

export function writtenOffCleaner(deps: {
  driverName: string;
  nodeId: string;
  kept: WrittenOffVolume[];
  /** The count still to delete changed. */
  onChange(pending: number): void;
}): WrittenOffCleaner {
  let kept = [...deps.kept];
  let draining: Promise<void> | undefined;
  const onNode = proxyActivities<NodeActivities>(
    deleteOptions(deps.driverName, deps.nodeId, `delete volumes written off while ${deps.nodeId} was forgotten`),
  );
  const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 5 } });

  const deleteOne = async (volume: WrittenOffVolume, poolId: string): Promise<string> => {
    // A create's allocation may be on whatever pool the node has now (see WrittenOffVolume.anyPool).
    const where = { key: volume.key, poolIdPrefix: volume.anyPool ? poolIdPrefix(poolId) : volume.poolIdPrefix };
    try {
      return volume.kind === 'snapshot'
        ? await onNode.deleteSnapshotOnNode(where)
        : await onNode.deleteVolumeOnNode(where);
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      // A definite refusal: left on the pool, where the orphan report shows it (no PV, no pending operation).
      log.warn('a written-off volume could not be deleted; see the orphan report', { ...volume, error: String(error) });
      return 'refused';
    }
  };

  const run = async (poolId: string) => {
    const held = (volume: WrittenOffVolume) => volume.anyPool === true || ownsVolume(poolId, volume.poolIdPrefix);
    const gone = kept.filter((volume) => !held(volume));
    if (gone.length > 0) {
      log.info('written-off volumes were on a pool this node no longer has: nothing to delete', {
        nodeId: deps.nodeId,
        volumeIds: gone.map((volume) => volume.volumeId),
      });
      kept = kept.filter(held);
      deps.onChange(kept.length);
    }
    while (kept.length > 0) {
      const batch = kept.slice(0, BATCH);
      const outcomes = await Promise.all(batch.map((volume) => deleteOne(volume, poolId)));
      const report = batch.map((volume, index) => ({ ...volume, outcome: outcomes[index] ?? 'refused' }));
      try {
        await control.reportWrittenOffDeleted({ driverName: deps.driverName, nodeId: deps.nodeId, volumes: report });
      } catch (error) {
        if (!(error instanceof ActivityFailure)) throw error; // an Event is a report, not the decision
      }
      const done = new Set(batch.map(kindKey));
      kept = kept.filter((volume) => !done.has(kindKey(volume)));
      deps.onChange(kept.length);
    }
  };

  const drain = (poolId: string): Promise<void> =>
    (draining ??= run(poolId).finally(() => {
      draining = undefined;
    }));

  return {
    add(volume) {
      if (kept.some((known) => identity(known) === identity(volume))) return;
      kept.push(volume);
      deps.onChange(kept.length);
    },
    pending: () => [...kept],
    async drain(poolId) {
      await draining; // one started while live, perhaps for the same volumes: let it end first
      await drain(poolId);
    },
    drainInBackground(poolId) {
      void drain(poolId);
    },
    async settled() {
      while (draining) await draining;
    },
  };
}
