import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  defineSignal,
  defineUpdate,
  log,
  makeContinueAsNewFunc,
  patched,
  proxyActivities,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { PresenceActivities } from '../activities/presence-activities';
import { nodeTaskQueue } from '../common/names';
import type { ForgottenNode, NodeRecord, NodeRecordMemo, NodeReport, WrittenOffVolume } from '../node-records/types';
import { NODE_MEMO_KEY, PRESENCE_HEARTBEAT_TIMEOUT_MS } from '../node-records/types';
import { startCancellable } from './cancellable-work';
import { writeOffVolumeSignal } from './write-off-signal';
import { writtenOffCleaner } from './written-off-volumes';
import type { ForgetNotice } from './node-forgotten';
import { NodeIdKey, OperationKey, PhaseKey } from './search-attribute-keys';

/**
 * One node's record: one long-lived workflow per node, so no workflow hears from every node and no operation
 * reads a table of all nodes. Liveness is an activity the node agent holds on its own task queue and heartbeats
 * (heartbeats cost the server one write, no history event and no workflow task); when the agent stops or dies
 * the activity ends or times out, the record turns offline, and it schedules `reportPresence`, which waits in the
 * node's queue until the agent returns. Everything here is rebuilt from what the agent reports: a record that
 * is terminated or reset is started again by its agent, and losing it loses nothing an answer depends on.
 */
export interface NodePresenceInput {
  driverName: string;
  nodeId: string;
  /** Carried over continue-as-new. */
  memo?: NodeRecordMemo;
  /** Carried over continue-as-new: volumes written off while the node was forgotten, still on its pool. */
  writtenOff?: WrittenOffVolume[];
}

/** The decision that the node is gone for good (`durable-csi nodes forget`, or the Kubernetes Node policy). */
export const forgetNodeRecordSignal = defineSignal<[ForgetNotice]>('forgetNodeRecord');
/** The same decision asked of the record, which refuses it while its node is live (returns the decision kept). */
export const forgetNodeRecordUpdate = defineUpdate<ForgottenNode, [ForgetNotice]>('forgetNodeRecord');
/** Continue as new at the next point where no presence activity is pending (compaction, and the soak's faults). */
export const renewRecordSignal = defineSignal('renewRecord');

const HISTORY_LIMIT = 2000;

const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 5 } });

export async function nodePresence(input: NodePresenceInput): Promise<void> {
  const memo: NodeRecordMemo = input.memo ?? { nodeId: input.nodeId, live: false };
  const queue = nodeTaskQueue(input.driverName, input.nodeId);
  // No schedule-to-start timeout: the report waits in the node's queue for as long as the agent is away.
  const report = proxyActivities<PresenceActivities>({
    taskQueue: queue,
    startToCloseTimeout: '30s',
    // Short: a stopping agent refuses it, and its successor should register within seconds of starting.
    retry: { initialInterval: '1s', maximumInterval: '5s' },
  }).reportPresence;
  // One attempt: its end, however it ends, means the agent stopped holding it.
  const hold = proxyActivities<PresenceActivities>({
    taskQueue: queue,
    scheduleToStartTimeout: '1m',
    startToCloseTimeout: '2h',
    heartbeatTimeout: PRESENCE_HEARTBEAT_TIMEOUT_MS,
    retry: { maximumAttempts: 1 },
  }).holdPresence;

  const phase = () => (memo.forgotten ? 'forgotten' : memo.live ? 'live' : 'offline');
  const publish = () => {
    upsertMemo({ [NODE_MEMO_KEY]: { ...memo } });
    upsertSearchAttributes([{ key: PhaseKey, value: phase() }]);
  };
  // Handlers after publish: setHandler delivers a signal that came with signalWithStart at once.
  let renew = false;
  setHandler(renewRecordSignal, () => void (renew = true));
  // True from the node's report until it is offline again: its agent answers, so it cannot be forgotten.
  let answering = memo.live;
  const forget = (notice: ForgetNotice): ForgottenNode => {
    memo.forgotten ??= { ...notice, lastHeartbeat: memo.record?.lastHeartbeat };
    publish();
    return memo.forgotten;
  };
  setHandler(forgetNodeRecordSignal, (notice) => {
    // Sent by earlier releases after their own read of the record: the record's own state decides now.
    if (patched('forget-refused-while-live') && answering) {
      log.warn('forget ignored: the node is live', { nodeId: input.nodeId, reason: notice.reason });
      return;
    }
    forget(notice);
  });
  setHandler(forgetNodeRecordUpdate, forget, {
    validator: (_notice: ForgetNotice) => {
      if (!answering) return;
      const heard = memo.record ? ` (last report ${new Date(memo.record.lastHeartbeat).toISOString()})` : '';
      throw ApplicationFailure.nonRetryable(
        `node ${input.nodeId} is live${heard}; stop its agent before forgetting it`,
        'FailedPrecondition',
      );
    },
  });
  const cleaner = writtenOffCleaner({
    driverName: input.driverName,
    nodeId: input.nodeId,
    kept: input.writtenOff ?? [],
    onChange: (pending) => {
      if (memo.writtenOff === (pending || undefined)) return;
      memo.writtenOff = pending || undefined;
      publish();
    },
  });
  setHandler(writeOffVolumeSignal, (volume) => {
    cleaner.add(volume);
    // Written off while the node is back (the deletion's notice raced its return): delete it now.
    if (answering && memo.record) cleaner.drainInBackground(memo.record.poolId);
  });
  const record = (fresh: NodeReport): NodeRecord => ({
    ...fresh,
    firstSeen: memo.record?.firstSeen ?? Date.now(),
    lastHeartbeat: Date.now(), // workflow time: deterministic on replay
  });
  const announce = async () => {
    try {
      await control.announceLiveness({ driverName: input.driverName, nodeId: input.nodeId, live: memo.live });
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      // Best effort: waiting operations still finish correctly, only their phase lags until the next change.
    }
  };

  /** Runs the activity unless a renewal is asked first, in which case it is cancelled (undefined). */
  const unlessRenewed = async <T>(work: () => Promise<T>): Promise<{ value: T } | undefined> => {
    const { finished, cancel } = startCancellable(work, (value) => ({ value }));
    const renewed = condition(() => renew).then(() => undefined);
    const winner = await Promise.race([finished, renewed]);
    if (!winner) cancel();
    return winner;
  };

  while (!renew && !workflowInfo().continueAsNewSuggested && workflowInfo().historyLength < HISTORY_LIMIT) {
    if (!memo.live) {
      const reported = await unlessRenewed(report);
      if (!reported) break;
      const fresh = reported.value;
      const returning = memo.record !== undefined;
      // What was written off while the node was away goes first, before the node turns live: until then no
      // create is placed on it, so a re-created name cannot find the old volume on the pool. (A forget accepted
      // meanwhile is cleared just below; whatever it releases is written off and deleted in the background.)
      if (patched('record-deletes-written-off')) await cleaner.drain(fresh.poolId);
      answering = true;
      // A node that reports again after being forgotten is a new registration; its pool identity tells its old
      // volumes apart.
      Object.assign(memo, { record: record(fresh), live: true, forgotten: undefined });
      publish();
      // A first registration (a new node, or a record made again after it was lost) has nobody to tell: work
      // waiting for the node starts running at once anyway. Saves a visibility query per node at bootstrap.
      if (returning) await announce();
      continue;
    }
    try {
      const held = await unlessRenewed(hold);
      if (!held) break; // still live: the next run holds presence again
      memo.record = record(held.value.report);
      if (held.value.leaving) memo.live = false;
      // A forget applied while the node was live (by an earlier release) is void: the node answers.
      if (memo.forgotten && memo.live && patched('forget-refused-while-live')) memo.forgotten = undefined;
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      memo.live = false;
    }
    answering = memo.live;
    publish();
    if (!memo.live) await announce();
  }
  await cleaner.settled(); // a deletion of written-off volumes in flight ends before the list is handed over
  // Memo and search attributes are given explicitly: a new run otherwise starts with those its first run started
  // with, and readers would see a stale record until its first workflow task.
  await makeContinueAsNewFunc<typeof nodePresence>({
    memo: { [NODE_MEMO_KEY]: memo },
    typedSearchAttributes: [
      { key: OperationKey, value: 'node' },
      { key: NodeIdKey, value: input.nodeId },
      { key: PhaseKey, value: phase() },
    ],
  })({ ...input, memo, writtenOff: cleaner.pending().length > 0 ? cleaner.pending() : undefined });
}
