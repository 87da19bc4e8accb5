import type { WorkerOptions } from '@temporalio/worker';

/**
 * How many workflow executions the controller keeps in memory between their tasks. The SDK's default grows
 * with the heap limit (about 2,300 on a 4 GB heap): every deletion waiting for a down node then stayed cached,
 * about 0.4 MB each (1,000 waiting took the controller from about 200 to 600 MB). A create or delete lives
 * about a second and a few tasks, so the cache only needs to cover the operations in flight; an evicted one
 * replays its short history (about ten events) when its node answers. Measured in docs/performance.md.
 */
export const CONTROLLER_MAX_CACHED_WORKFLOWS = 100;

/**
 * The controller's workflow worker. The rest stays at the SDK's defaults (docs/performance.md): the reusable V8
 * context (a context per workflow cost more controller CPU and memory in `npm run bench`), and one workflow
 * thread (with a reused context the SDK documents no gain from more, and two cores are shared with the server).
 */
export function controllerWorkerTuning(): Partial<WorkerOptions> {
  return { maxCachedWorkflows: CONTROLLER_MAX_CACHED_WORKFLOWS };
}

/**
 * Long polls a node agent holds on its queue: one at rest, up to ten while the server reports a backlog there (a
 * node draining the work that waited for it). Tasks run concurrently either way; a poll that hands one over is
 * renewed at once.
 */
export const NODE_ACTIVITY_POLLS = { atRest: 1, backlogged: 10 } as const;

/**
 * The node agent's worker. Every idle poll of every node counts against the frontend's per-namespace limit on
 * concurrent polls (`frontend.namespaceCount`, 1,200 by default): a cluster of N nodes needs it above N plus the
 * controllers' polls (docs/operations.md). Autoscaled polls (the server's scaling decisions; halved when the
 * frontend refuses polls) keep that at one a node, yet drain a backlog as fast as ten fixed polls; one fixed poll
 * drained 1,000 waiting deletions in 36 s against 21 s (docs/performance.md, round 3). The count must be set through
 * `activityTaskPollerBehavior`: the SDK (1.24) still accepts `maxConcurrentActivityTaskPolls` but never reads it,
 * so an agent "set to one poll" held ten (test/integration/node-agent-polls.test.ts counts them on the wire).
 */
export function nodeWorkerTuning(): Partial<WorkerOptions> {
  return {
    activityTaskPollerBehavior: {
      type: 'autoscaling',
      minimum: NODE_ACTIVITY_POLLS.atRest,
      initial: NODE_ACTIVITY_POLLS.atRest,
      maximum: NODE_ACTIVITY_POLLS.backlogged,
    },
    // The presence hold heartbeats at its own cadence, every 10 s or more (common/names.ts
    // presenceHeartbeatEveryMs): with the SDK's throttle capped at 10 s each of its heartbeats is sent when made,
    // not held back to 80% of the timeout, which would leave too small a margin.
    maxHeartbeatThrottleInterval: '10s',
  };
}
