import type { ActivityOptions, RetryPolicy } from '@temporalio/common';
import { COPY_TIME_CEILING_MS, COPY_TIME_MARGIN_MS } from '../common/copy-budget';
import { NON_RETRYABLE_TYPES } from '../common/failures';
import { nodeTaskQueue } from '../common/names';

/**
 * The options of every storage activity on a node's own queue (activities/node-activities.ts), in one place.
 *
 * Node activities heartbeat every second (activities/heartbeating.ts), so a dead agent is noticed after the
 * heartbeat timeout, in seconds, and the attempt is retried on the same node; the start-to-close timeout only has
 * to allow for the slowest honest attempt. Of the activities that change a pool, none has a schedule-to-start
 * timeout except create's first try: a node that is down keeps its work waiting in its queue until the agent
 * returns (invariant 2). The reads (list, inspect) move on from a node that does not pick them up.
 *
 * The heartbeat timeouts differ for no reason of their own: create has had 5 s since it was written, delete and
 * expand 10 s. Both are far above the 1 s interval. They are kept as they were, since the timeouts are part of
 * what the crash tests measure; unifying them would only change how soon a dead agent's create is retried.
 */

/** Retry on the node until it answers; only bad input (a non-retryable failure type) ends the retries. */
export const UNTIL_THE_NODE_ANSWERS: RetryPolicy = {
  initialInterval: '1s',
  maximumInterval: '30s',
  nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES],
};

/** Create's heartbeat timeout (see above for why it is not delete's). */
const CREATE_HEARTBEAT_TIMEOUT = '5s';
/** Delete's and expand's heartbeat timeout. */
const HEARTBEAT_TIMEOUT = '10s';
/** Allocating a reservation or a preallocated image file (and formatting it) stays well within a minute. */
const ALLOCATE_OR_DELETE_TIMEOUT = '60s';
/**
 * Expansion has had 5 m since it was written (aa484dc, no reason recorded); growing a loop image may resize its
 * filesystem online, the slowest step on a large volume. Kept.
 */
const EXPAND_TIMEOUT = '5m';
/**
 * A snapshot, a restore or a clone copies a whole volume (cp, reflinked where the filesystem can): as slow as the
 * disk when it cannot. The node bounds each copy by a budget derived from its size (common/copy-budget.ts): the
 * copy is stopped and the attempt fails, retryably, when it runs past it. The workflow does not know a snapshot's
 * source size, so this is the ceiling of every budget plus the steps around the copy: the node's budget always ends
 * an attempt first, and the 1 s heartbeat notices a dead agent in seconds. (It was 30 m, shorter than the budget of
 * a large volume: Temporal then retried while the first copy still ran.)
 */
const COPY_TIMEOUT = COPY_TIME_CEILING_MS + COPY_TIME_MARGIN_MS;

/**
 * The first attempt on a node may be abandoned only if it provably never ran (invariant 4). A node's queue has
 * no other poller, so a schedule-to-start timeout means the agent is not there; one attempt only, because a
 * second attempt's schedule-to-start timeout would say nothing about whether the first one allocated.
 */
const FIRST_TRY_SCHEDULE_TO_START = '20s';

/** `copying`: a restore or clone, whose allocation is a copy of its source. */
export function createFirstTryOptions(driverName: string, nodeId: string, copying = false): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    scheduleToStartTimeout: FIRST_TRY_SCHEDULE_TO_START,
    startToCloseTimeout: copying ? COPY_TIMEOUT : ALLOCATE_OR_DELETE_TIMEOUT,
    heartbeatTimeout: CREATE_HEARTBEAT_TIMEOUT,
    retry: { maximumAttempts: 1 },
  };
}

/** Once an attempt may have allocated, the node must finish what it started: retry there until it answers. */
export function createCompletionOptions(driverName: string, nodeId: string, copying = false): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    startToCloseTimeout: copying ? COPY_TIMEOUT : ALLOCATE_OR_DELETE_TIMEOUT,
    heartbeatTimeout: CREATE_HEARTBEAT_TIMEOUT,
    retry: UNTIL_THE_NODE_ANSWERS,
  };
}

/** Deleting on the volume's home node and nowhere else; waits in the queue while the node is down. */
export function deleteOptions(driverName: string, nodeId: string, summary: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    startToCloseTimeout: ALLOCATE_OR_DELETE_TIMEOUT,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: UNTIL_THE_NODE_ANSWERS,
    summary,
  };
}

export function expandOptions(driverName: string, nodeId: string, summary: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    startToCloseTimeout: EXPAND_TIMEOUT,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: UNTIL_THE_NODE_ANSWERS,
    summary,
  };
}

/**
 * A listing asks live nodes only and moves past one that does not pick the work up within 5 s (its entries are
 * missing from the answer, which says so): one attempt, no waiting for a node that is down.
 */
export function listOptions(driverName: string, nodeId: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    scheduleToStartTimeout: '5s',
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 1 },
  };
}

/**
 * A look at one volume (ValidateVolumeCapabilities) asks its node once and gives up after 10 s unpicked: the CO
 * waits on the call, and is told the node is Unavailable and to try again.
 */
export function inspectOptions(driverName: string, nodeId: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    scheduleToStartTimeout: '10s',
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 1 },
  };
}

/** A snapshot is made on its source's node and nowhere else: waits in the queue while the node is down. */
export function snapshotOptions(driverName: string, nodeId: string, summary: string): ActivityOptions {
  return {
    taskQueue: nodeTaskQueue(driverName, nodeId),
    startToCloseTimeout: COPY_TIMEOUT,
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: UNTIL_THE_NODE_ANSWERS,
    summary,
  };
}
