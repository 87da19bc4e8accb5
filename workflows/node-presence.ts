import {
  ActivityFailure,
  CancellationScope,
  condition,
  defineSignal,
  makeContinueAsNewFunc,
  proxyActivities,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { PresenceActivities } from '../activities/presence-activities';
import { nodeTaskQueue } from '../common/names';
import type { ForgottenNode, NodeRecord, NodeRecordMemo, NodeReport } from '../common/registry-types';
import { NODE_MEMO_KEY, PRESENCE_HEARTBEAT_TIMEOUT_MS } from '../common/registry-types';
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
}

/** The decision that the node is gone for good (`durable-csi nodes forget`, or the Kubernetes Node policy). */
export const forgetNodeRecordSignal = defineSignal<[ForgetNotice]>('forgetNodeRecord');
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
  setHandler(forgetNodeRecordSignal, (notice) => {
    const forgotten: ForgottenNode = { ...notice, lastHeartbeat: memo.record?.lastHeartbeat };
    memo.forgotten = forgotten;
    publish();
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
    const scope = new CancellationScope();
    const running = scope.run(work);
    running.catch(() => undefined); // once cancelled, its failure is expected and ignored
    const renewed = condition(() => renew).then(() => undefined);
    const winner = await Promise.race([running.then((value) => ({ value })), renewed]);
    if (!winner) scope.cancel();
    return winner;
  };

  while (!renew && !workflowInfo().continueAsNewSuggested && workflowInfo().historyLength < HISTORY_LIMIT) {
    if (!memo.live) {
      const reported = await unlessRenewed(report);
      if (!reported) break;
      const fresh = reported.value;
      const returning = memo.record !== undefined;
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
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      memo.live = false;
    }
    publish();
    if (!memo.live) await announce();
  }
  // Memo and search attributes are given explicitly: a new run otherwise starts with those its first run started
  // with, and readers would see a stale record until its first workflow task.
  await makeContinueAsNewFunc<typeof nodePresence>({
    memo: { [NODE_MEMO_KEY]: memo },
    typedSearchAttributes: [
      { key: OperationKey, value: 'node' },
      { key: NodeIdKey, value: input.nodeId },
      { key: PhaseKey, value: phase() },
    ],
  })({ ...input, memo });
}
