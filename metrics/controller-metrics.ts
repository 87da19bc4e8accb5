import type { Client } from '@temporalio/client';
import { Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import { listNodeViews, nodeRecordsQuery } from '../node-records/reads';
import type { Logger } from '../common/logger';
import { operationTypesClause, NodeIdKey, OperationKey, PhaseKey } from '../common/names';
import { operationName } from '../operations/pending-operations';
import { registerPoolGauges } from './pool-gauges';

/** Bounds the work of one scrape on a cluster with very many pending operations. */
const MAX_LISTED = 10_000;

/**
 * Gauges read at scrape time from Temporal (the truth), never kept in memory: pending operations by node and
 * phase from visibility, the oldest one's age, and the node records' view of nodes and pools.
 */
export function registerControllerMetrics(registry: Registry, client: Client, driverName: string, logger: Logger) {
  new Gauge({
    name: 'durable_csi_nodes',
    help: 'Node records, by state (registered counts every record that is not forgotten)',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      // Counts from visibility: the cost of a scrape does not grow with the number of nodes.
      const count = async (phase?: 'live' | 'offline' | 'forgotten') =>
        Number((await client.workflow.count(nodeRecordsQuery(driverName, phase))).count);
      const [live, offline, forgotten] = await Promise.all([count('live'), count('offline'), count('forgotten')]);
      this.reset();
      this.set({ state: 'registered' }, live + offline);
      this.set({ state: 'live' }, live);
      this.set({ state: 'offline' }, offline);
      this.set({ state: 'forgotten' }, forgotten);
    },
  });
  // Every node's pool as its record last showed it (one listing per scrape; each agent also serves its own).
  registerPoolGauges(registry, () => listNodeViews(client, driverName));
  // Both pending gauges come from one listing per scrape (prom-client collects metrics concurrently).
  let snapshot: { at: number; listing: Promise<PendingSnapshot> } | undefined;
  const pendingSnapshot = () => {
    if (!snapshot || Date.now() - snapshot.at > 1000) {
      snapshot = { at: Date.now(), listing: listPending(client, driverName) };
    }
    return snapshot.listing;
  };
  new Gauge({
    name: 'durable_csi_pending_operations',
    help: 'Operations (create, delete, expand, snapshot-create, snapshot-delete) still running, by node, operation and phase',
    labelNames: ['node', 'operation', 'phase'],
    registers: [registry],
    async collect() {
      this.reset();
      try {
        for (const [key, count] of (await pendingSnapshot()).counts) {
          const [node, operation, phase] = JSON.parse(key) as [string, string, string];
          this.set({ node, operation, phase }, count);
        }
      } catch (error) {
        logger.warn({ err: error }, 'could not list pending operations for metrics');
      }
    },
  });
  new Gauge({
    name: 'durable_csi_oldest_pending_operation_seconds',
    help: 'Age of the oldest running operation, by node',
    labelNames: ['node'],
    registers: [registry],
    async collect() {
      this.reset();
      try {
        for (const [node, age] of (await pendingSnapshot()).oldestByNode) this.set({ node }, age);
      } catch {
        // Reported once, by the pending-operations gauge.
      }
    },
  });
}

interface PendingSnapshot {
  /** JSON [node, operation, phase] -> count. */
  counts: Map<string, number>;
  oldestByNode: Map<string, number>;
}

async function listPending(client: Client, driverName: string): Promise<PendingSnapshot> {
  const snapshot: PendingSnapshot = { counts: new Map(), oldestByNode: new Map() };
  const now = Date.now();
  const query = `ExecutionStatus = "Running" AND ${operationTypesClause()}`;
  let listed = 0;
  for await (const workflow of client.workflow.list({ query })) {
    if (!workflow.workflowId.startsWith(`${driverName}/`)) continue;
    if (++listed > MAX_LISTED) break;
    const attributes = workflow.typedSearchAttributes;
    const node = String(attributes.get(NodeIdKey) ?? 'unplaced');
    const operation = operationName(workflow.type, attributes.get(OperationKey));
    const key = JSON.stringify([node, operation, String(attributes.get(PhaseKey) ?? 'unknown')]);
    snapshot.counts.set(key, (snapshot.counts.get(key) ?? 0) + 1);
    const age = (now - workflow.startTime.getTime()) / 1000;
    snapshot.oldestByNode.set(node, Math.max(snapshot.oldestByNode.get(node) ?? 0, age));
  }
  return snapshot;
}
