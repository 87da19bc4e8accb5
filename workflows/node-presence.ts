import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  makeContinueAsNewFunc,
  deprecatePatch,
  proxyActivities,
  setHandler,
  TimeoutFailure,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { TimeoutType } from '@temporalio/common';
import type { ControlActivities } from '../activities/control-activities';
import type { PresenceActivities, PresenceHold } from '../activities/presence-activities';
import {
  forgetNodeRecordUpdate,
  NODE_MEMO_KEY,
  NodeIdKey,
  nodeTaskQueue,
  OperationKey,
  PhaseKey,
  MAX_PRESENCE_TIMEOUT_MS,
  MIN_PRESENCE_TIMEOUT_MS,
  PRESENCE_HEARTBEAT_TIMEOUT_MS,
  renewRecordSignal,
  writeOffVolumeSignal,
  type ForgetNotice,
  type ForgottenNode,
  type NodeRecord,
  type NodeRecordMemo,
  type NodeReport,
  type WrittenOffVolume,
} from '../common/names';
import { startCancellable } from './node-work';
import { WrittenOffCleaner } from './written-off-volumes';

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

const HISTORY_LIMIT = 2000;

const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 5 } });

/**
 * One run of a node's record, as a sequence of steps. The order of its Temporal commands (upserts, activities,
 * patch markers, continue-as-new) is what running records replay: the steps keep every `await` in this function
 * or in the awaited helpers it always had (`unlessRenewed`, `announce`), so not even the order in which
 * concurrent work (a drain of written-off volumes) interleaves with the loop changes. The steps around them are
 * synchronous.
 */
export async function nodePresence(input: NodePresenceInput): Promise<void> {
  const run = startRun(input);
  const { report, hold } = presenceActivities(input);
  // In this order, once what they use exists: setHandler delivers at once a signal that came with
  // signalWithStart, and what such a delivery publishes is part of the history.
  listenForRenewal(run);
  acceptForgetUnlessLive(run);
  const cleaner = keepWrittenOffVolumes(run);
  while (hasRoom(run)) {
    if (!run.memo.live) {
      const reported = await unlessRenewed(run, report);
      if (!reported) break;
      const returning = run.memo.record !== undefined;
      answerFromReport(run, reported.value);
      // What was written off while the node was away goes first, before the node turns live: until then no
      // create is placed on it, so a re-created name cannot find the old volume on the pool. A forget is refused
      // from the report on, and the node turns live past deletions that keep failing (retried beside the live node).
      await cleaner.drain(reported.value.poolId);
      turnLive(run, reported.value);
      if (cleaner.pending().length > 0) cleaner.drainInBackground(reported.value.poolId);
      // A first registration (a new node, or a record made again after it was lost) has nobody to tell: work
      // waiting for the node starts running at once anyway. Saves a visibility query per node at bootstrap.
      if (returning) await announce(run);
      continue;
    }
    const timeoutMs = holdTimeoutMs(run);
    try {
      const held = await unlessRenewed(run, () => hold(timeoutMs));
      if (!held) break; // still live: the next run holds presence again
      recordHeld(run, held.value);
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      recordLastHeartbeat(run, error, timeoutMs);
      run.memo.live = false;
    }
    publishLiveness(run);
    if (!run.memo.live) await announce(run);
  }
  await cleaner.settled(); // a deletion of written-off volumes in flight ends before the list is handed over
  await continueAsNew(run, cleaner);
}

/** What one run of a record holds, shared by its signal handlers and its loop. */
interface RecordRun {
  readonly input: NodePresenceInput;
  /** The record as readers see it: published (memo and phase) on every change, carried over continue-as-new. */
  readonly memo: NodeRecordMemo;
  /**
   * True from the node's report until it is offline again: its agent answers, so it cannot be forgotten. From the
   * report on, before the written-off volumes are deleted: their deletions are tried in bounded rounds, so one that
   * keeps failing does not keep the node out of service.
   */
  answering: boolean;
  /** A renewal was asked: the run ends at the next point where no presence activity is pending. */
  renew: boolean;
}

function startRun(input: NodePresenceInput): RecordRun {
  const memo: NodeRecordMemo = input.memo ?? { nodeId: input.nodeId, live: false };
  return { input, memo, answering: memo.live, renew: false };
}

/**
 * 0.3.0: each hold is scheduled with the heartbeat timeout the node's agent reported (its --presence-timeout, 60 s
 * by default), not the fixed 30 s of 0.2.0: the agent heartbeats at a cadence derived from it, so a longer timeout
 * costs Temporal fewer heartbeats per idle node (docs/scale.md). A report without one (an agent before 0.3.0) keeps
 * 30 s. The hold's schedule-to-start timeout is the same (it was 1 min). Only options of the hold change, which replay does not compare, so both releases replay each other's
 * histories; the marker is a deprecated one, which 0.2.0 (calling nothing for it) skips: with patched() its marker
 * stopped every node record of a cluster downgraded to 0.2.0 (TMPRL1100, docs/workflow-changes.md).
 */
const PRESENCE_TIMEOUT_FROM_REPORT = 'presence-timeout-from-report';

/** The two activities the node's agent answers on its own queue. */
function presenceActivities(input: NodePresenceInput) {
  const queue = nodeTaskQueue(input.driverName, input.nodeId);
  // No schedule-to-start timeout: the report waits in the node's queue for as long as the agent is away.
  const report = proxyActivities<PresenceActivities>({
    taskQueue: queue,
    startToCloseTimeout: '30s',
    // Short: a stopping agent refuses it, and its successor should register within seconds of starting.
    retry: { initialInterval: '1s', maximumInterval: '5s' },
  }).reportPresence;
  // One attempt: its end, however it ends, means the agent stopped holding it. Not started within the agent's
  // presence timeout means the same: an agent that died between two holds (a renewal, a hold that ended) is shown
  // offline as soon as one that died during a hold, not a fixed minute later.
  const hold = (heartbeatTimeoutMs: number) =>
    proxyActivities<PresenceActivities>({
      taskQueue: queue,
      scheduleToStartTimeout: heartbeatTimeoutMs,
      startToCloseTimeout: '2h',
      heartbeatTimeout: heartbeatTimeoutMs,
      retry: { maximumAttempts: 1 },
    }).holdPresence();
  return { report, hold };
}

/** The heartbeat timeout of the next hold: the agent's, as its latest report says. */
function holdTimeoutMs(run: RecordRun): number {
  deprecatePatch(PRESENCE_TIMEOUT_FROM_REPORT);
  const reported = run.memo.record?.presenceTimeoutMs;
  // Bounds again here: a report is the agent's word, and a timeout of 0 would hold presence with none at all.
  if (typeof reported !== 'number' || !(reported >= MIN_PRESENCE_TIMEOUT_MS)) return PRESENCE_HEARTBEAT_TIMEOUT_MS;
  return Math.min(reported, MAX_PRESENCE_TIMEOUT_MS);
}

function phaseOf(memo: NodeRecordMemo): 'forgotten' | 'live' | 'offline' {
  return memo.forgotten ? 'forgotten' : memo.live ? 'live' : 'offline';
}

function publish(memo: NodeRecordMemo): void {
  upsertMemo({ [NODE_MEMO_KEY]: { ...memo } });
  upsertSearchAttributes([{ key: PhaseKey, value: phaseOf(memo) }]);
}

function listenForRenewal(run: RecordRun): void {
  setHandler(renewRecordSignal, () => void (run.renew = true));
}

/** A forget is refused while the node answers: the record's own state decides, whatever the caller read. */
function acceptForgetUnlessLive(run: RecordRun): void {
  setHandler(forgetNodeRecordUpdate, (notice) => forget(run, notice), {
    validator: (_notice: ForgetNotice) => {
      if (!run.answering) return;
      const record = run.memo.record;
      const heard = record ? ` (last report ${new Date(record.lastHeartbeat).toISOString()})` : '';
      // Between its report and turning live the node's record deletes what was written off on it.
      const state = run.memo.live ? 'is live' : 'answers (back, deleting what was written off while it was forgotten)';
      throw ApplicationFailure.nonRetryable(
        `node ${run.input.nodeId} ${state}${heard}; stop its agent before forgetting it`,
        'FailedPrecondition',
      );
    },
  });
}

function forget(run: RecordRun, notice: ForgetNotice): ForgottenNode {
  run.memo.forgotten ??= { ...notice, lastHeartbeat: run.memo.record?.lastHeartbeat };
  publish(run.memo);
  return run.memo.forgotten;
}

/** The volumes written off while the node was forgotten, deleted on its pool when it is back (or at once). */
function keepWrittenOffVolumes(run: RecordRun): WrittenOffCleaner {
  const { input, memo } = run;
  const cleaner = new WrittenOffCleaner({
    driverName: input.driverName,
    nodeId: input.nodeId,
    kept: input.writtenOff ?? [],
    onChange: (pending) => {
      if (memo.writtenOff === (pending || undefined)) return;
      memo.writtenOff = pending || undefined;
      publish(memo);
    },
  });
  setHandler(writeOffVolumeSignal, (volume) => {
    cleaner.add(volume);
    // Written off while the node is back (the deletion's notice raced its return): delete it now.
    if (run.answering && memo.record) cleaner.drainInBackground(memo.record.poolId);
  });
  // A live node's write-offs still failing when the previous run ended: their rounds go on in this one.
  if (memo.live && memo.record && cleaner.pending().length > 0) cleaner.drainInBackground(memo.record.poolId);
  return cleaner;
}

/** Room for another round: no renewal asked, and the history still short. */
function hasRoom(run: RecordRun): boolean {
  return !run.renew && !workflowInfo().continueAsNewSuggested && workflowInfo().historyLength < HISTORY_LIMIT;
}

/** Runs the activity unless a renewal is asked first, in which case it is cancelled (undefined). */
async function unlessRenewed<T>(run: RecordRun, work: () => Promise<T>): Promise<{ value: T } | undefined> {
  const { finished, cancel } = startCancellable(work, (value) => ({ value }));
  const renewed = condition(() => run.renew).then(() => undefined);
  const winner = await Promise.race([finished, renewed]);
  if (!winner) cancel();
  return winner;
}

function reportedRecord(memo: NodeRecordMemo, fresh: NodeReport): NodeRecord {
  return {
    ...fresh,
    firstSeen: memo.record?.firstSeen ?? Date.now(),
    lastHeartbeat: Date.now(), // workflow time: deterministic on replay
  };
}

/**
 * The node reported: from here on its agent answers, so it cannot be forgotten, and
 * it is forgotten no more. Readers see its new report, still offline (no create is placed on it yet) and not
 * forgotten: `nodes forget` asks the record, which refuses; operations started now wait for the node, which runs
 * them (an expansion, a snapshot), instead of ending as for a forgotten node.
 */
function answerFromReport(run: RecordRun, fresh: NodeReport): void {
  run.answering = true;
  Object.assign(run.memo, { record: reportedRecord(run.memo, fresh), forgotten: undefined });
  publish(run.memo);
}

/**
 * The node reported: it is live. A node that reports again after being forgotten is a new registration; its pool
 * identity tells its old volumes apart.
 */
function turnLive(run: RecordRun, fresh: NodeReport): void {
  run.answering = true;
  Object.assign(run.memo, { record: reportedRecord(run.memo, fresh), live: true, forgotten: undefined });
  publish(run.memo);
}

/** A hold ended with the agent's last report: live still, unless the agent is leaving. */
function recordHeld(run: RecordRun, held: PresenceHold): void {
  const { memo } = run;
  memo.record = reportedRecord(memo, held.report);
  if (held.leaving) memo.live = false;
}

/**
 * A hold that timed out (the agent died or lost contact) still tells the agent's last figures: its last heartbeat.
 * Kept, so that an offline record shows what the pool held when the agent went (the Node-deleted policy decides on
 * its volume and snapshot counts), not what it held when the hold began, up to an hour earlier. The server times a
 * hold out its heartbeat timeout after the last heartbeat it received, which dates it. Only the memo's
 * content changes, not the commands: the same upserts follow.
 */
function recordLastHeartbeat(run: RecordRun, error: ActivityFailure, timeoutMs: number): void {
  const timeout = error.cause instanceof TimeoutFailure ? error.cause : undefined;
  const last = timeout?.lastHeartbeatDetails as NodeReport | undefined;
  const record = run.memo.record;
  if (!timeout || !record || !last || typeof last !== 'object' || last.nodeId !== run.input.nodeId) return;
  const heard =
    timeout.timeoutType === TimeoutType.HEARTBEAT
      ? Math.max(record.lastHeartbeat, Date.now() - timeoutMs)
      : record.lastHeartbeat;
  run.memo.record = { ...record, ...last, firstSeen: record.firstSeen, lastHeartbeat: heard };
}

function publishLiveness(run: RecordRun): void {
  run.answering = run.memo.live;
  publish(run.memo);
}

/** Tells operations waiting on the node that it changed (their phase follows it). */
async function announce(run: RecordRun): Promise<void> {
  try {
    await control.announceLiveness({ driverName: run.input.driverName, nodeId: run.input.nodeId, live: run.memo.live });
  } catch (error) {
    if (!(error instanceof ActivityFailure)) throw error;
    // Best effort: waiting operations still finish correctly, only their phase lags until the next change.
  }
}

/**
 * The next run takes the record and the write-offs still pending. Memo and search attributes are given
 * explicitly: a new run otherwise starts with those its first run started with, and readers would see a stale
 * record until its first workflow task.
 */
function continueAsNew(run: RecordRun, cleaner: WrittenOffCleaner): Promise<never> {
  const { input, memo } = run;
  return makeContinueAsNewFunc<typeof nodePresence>({
    memo: { [NODE_MEMO_KEY]: memo },
    typedSearchAttributes: [
      { key: OperationKey, value: 'node' },
      { key: NodeIdKey, value: input.nodeId },
      { key: PhaseKey, value: phaseOf(memo) },
    ],
  })({ ...input, memo, writtenOff: cleaner.pending().length > 0 ? cleaner.pending() : undefined });
}
