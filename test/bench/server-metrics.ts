/**
 * The Temporal server's own account of the work, read from the dev server's Prometheus endpoint before and after a
 * phase: which RPCs the workers and clients made, and what the server wrote.
 */

/** Counter values by series, e.g. `service_requests|frontend|StartWorkflowExecution`. */
export type Counters = Map<string, number>;

/** What one phase cost the server, summed (divide by the operations for a per-operation figure). */
export interface ServerWork {
  /** Workflow tasks completed or failed by workers. */
  workflowTasks: number;
  /** Activity tasks completed, failed or cancelled by workers. */
  activityTasks: number;
  activityHeartbeats: number;
  /** Frontend RPCs by method (clients and workers alike), polls included. */
  rpcs: Record<string, number>;
  /** Every persistence write (mutable state, history, tasks, queues). */
  persistenceWrites: number;
  /** Persistence writes by operation. */
  writes: Record<string, number>;
  /** Writes of a workflow's mutable state with its new history events (create, update, conflict-resolve). */
  mutableStateWrites: number;
  /** Visibility records written (started, upserted, closed). */
  visibilityWrites: number;
}

const WANTED = new Set(['service_requests', 'persistence_requests', 'visibility_persistence_requests']);
const SERIES = /^([a-z_]+)\{([^}]*)\}\s+([0-9.eE+-]+)$/;
const LABEL = /([a-z_]+)="((?:[^"\\]|\\.)*)"/g;
/** Persistence operations that change stored state (reads are Get/List/Read/Scan/Count/Assert...). */
const WRITE =
  /^(Create|Update|Append|Complete|RangeComplete|Delete|Set|ConflictResolve|Put|Upsert|Record|Insert|Enqueue|Lease|Renew)/;
const MUTABLE_STATE_WRITES = new Set([
  'CreateWorkflowExecution',
  'UpdateWorkflowExecution',
  'ConflictResolveWorkflowExecution',
  'SetWorkflowExecution',
]);

export function parseCounters(text: string): Counters {
  const counters: Counters = new Map();
  for (const line of text.split('\n')) {
    const match = SERIES.exec(line);
    if (!match || !WANTED.has(match[1] ?? '')) continue;
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(LABEL)].map((label) => [label[1], label[2]]));
    const key = `${match[1]}|${labels.service_name ?? ''}|${labels.operation ?? ''}`;
    counters.set(key, (counters.get(key) ?? 0) + Number(match[3]));
  }
  return counters;
}

export async function scrapeCounters(metricsUrl: string): Promise<Counters> {
  // Long: the dev server labels its matching metrics by task queue, and at 5,000 nodes (a queue each) one scrape is
  // tens of megabytes that it takes more than 10 s to write.
  const response = await fetch(metricsUrl, { signal: AbortSignal.timeout(180_000) });
  if (!response.ok) throw new Error(`GET ${metricsUrl}: HTTP ${response.status}`);
  return parseCounters(await response.text());
}

export function serverWork(before: Counters, after: Counters): ServerWork {
  const work: ServerWork = {
    workflowTasks: 0,
    activityTasks: 0,
    activityHeartbeats: 0,
    rpcs: {},
    persistenceWrites: 0,
    writes: {},
    mutableStateWrites: 0,
    visibilityWrites: 0,
  };
  for (const [key, value] of after) {
    const delta = value - (before.get(key) ?? 0);
    if (delta <= 0) continue;
    const [metric, service, operation = ''] = key.split('|');
    if (metric === 'service_requests' && service === 'frontend') {
      work.rpcs[operation] = (work.rpcs[operation] ?? 0) + delta;
      if (/^RespondWorkflowTask(Completed|Failed)$/.test(operation)) work.workflowTasks += delta;
      if (/^RespondActivityTask(Completed|Failed|Canceled)(ById)?$/.test(operation)) work.activityTasks += delta;
      if (/^RecordActivityTaskHeartbeat(ById)?$/.test(operation)) work.activityHeartbeats += delta;
    } else if (metric === 'persistence_requests' && WRITE.test(operation)) {
      work.persistenceWrites += delta;
      work.writes[operation] = (work.writes[operation] ?? 0) + delta;
      if (MUTABLE_STATE_WRITES.has(operation)) work.mutableStateWrites += delta;
    } else if (metric === 'visibility_persistence_requests' && WRITE.test(operation)) {
      work.visibilityWrites += delta;
    }
  }
  return work;
}
