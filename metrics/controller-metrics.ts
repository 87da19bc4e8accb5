import type { Client } from '@temporalio/client';
import { Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import { listNodeRecords, nodeRecordsQuery, type NodeRecordView } from '../node-records/reads';
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
export function registerControllerMetrics(
  registry: Registry,
  /** Undefined until the controller has reached Temporal: its gauges then export nothing. */
  connectedClient: () => Client | undefined,
  driverName: string,
  logger: Logger,
  temporalUnreachable: () => Promise<string | undefined>,
) {
  // What a replica cannot read from Temporal it does not export (no series, never a zero): the scrape still answers,
  // with durable_csi_temporal_up and the call counters, and a rule taking the max over replicas reads the others.
  new Gauge({
    name: 'durable_csi_temporal_up',
    help: 'Whether Temporal answers this controller (1) or not (0): the same check as its readiness',
    registers: [registry],
    async collect() {
      this.set((await temporalUnreachable().catch(String)) === undefined ? 1 : 0);
    },
  });
  new Gauge({
    name: 'durable_csi_nodes',
    help: 'Node records, by state (registered counts every record that is not forgotten)',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      this.reset();
      // Counts from visibility: the cost of a scrape does not grow with the number of nodes.
      const client = connectedClient();
      if (!client) return;
      const count = async (phase?: 'live' | 'offline' | 'forgotten') =>
        Number((await client.workflow.count(nodeRecordsQuery(driverName, phase))).count);
      try {
        const [live, offline, forgotten] = await Promise.all([count('live'), count('offline'), count('forgotten')]);
        this.set({ state: 'registered' }, live + offline);
        this.set({ state: 'live' }, live);
        this.set({ state: 'offline' }, offline);
        this.set({ state: 'forgotten' }, forgotten);
      } catch (error) {
        logger.warn({ err: error }, 'could not count node records for metrics');
      }
    },
  });
  // One listing of the records per scrape feeds the pool gauges and liveness (prom-client collects concurrently).
  let records: { at: number; listing: Promise<NodeRecordView[]> } | undefined;
  const recordListing = () => {
    const client = connectedClient();
    if (!client) return Promise.reject(new Error('not connected to Temporal yet'));
    if (!records || Date.now() - records.at > 1000) {
      records = { at: Date.now(), listing: listNodeRecords(client, driverName) };
    }
    return records.listing;
  };
  // Every node's pool as its record last showed it (each agent also serves its own).
  registerPoolGauges(registry, async () => {
    if (!connectedClient()) return [];
    try {
      return (await recordListing()).flatMap((view) => (view.node ? [view.node] : []));
    } catch (error) {
      logger.warn({ err: error }, 'could not list node records for metrics');
      return [];
    }
  });
  new Gauge({
    name: 'durable_csi_node_live',
    help: 'Whether each node agent heartbeats its record (1) or not (0); forgotten nodes are left out',
    labelNames: ['node'],
    registers: [registry],
    async collect() {
      this.reset();
      try {
        for (const view of await recordListing())
          if (view.node && !view.forgotten) this.set({ node: view.nodeId }, view.node.live ? 1 : 0);
      } catch {
        // Reported once, by the pool gauges.
      }
    },
  });
  // Both pending gauges come from one listing per scrape (prom-client collects metrics concurrently).
  let snapshot: { at: number; listing: Promise<PendingSnapshot> } | undefined;
  const pendingSnapshot = () => {
    const client = connectedClient();
    if (!client) return Promise.reject(new Error('not connected to Temporal yet'));
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
