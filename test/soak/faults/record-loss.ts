import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { nodeRecordWorkflowId, renewRecordSignal } from '../../../common/names';
import { connectionOptions } from '../../../temporal/config';
import { resetToFirstTask } from '../../support/reset-workflow';
import type { Fault } from './types';
import { sleep, step } from './types';

/**
 * The node records are lost while deletions are aimed at a node that is down: records continued as new, reset to
 * their first workflow task and terminated (what an operator clearing long-running workflows in the UI, or a
 * namespace restored from backup, does), the down node's among them. No deletion (of a volume or a snapshot) may be answered OK while its node is down; the audit
 * proves nothing leaked.
 */
export const recordLoss: Fault = {
  kind: 'record-loss',
  plannedOps: () => 6,
  async run(context, record) {
    const { cluster, workload, prng } = context;
    const connection = await Connection.connect(connectionOptions(context.temporal.config));
    const client = new Client({ connection });
    try {
      const node = prng.pick(cluster.nodes);
      await workload.ensureSnapshotsOn(node.name, 1, record.kind, 30_000);
      await workload.ensureOn(node.name, 2, record.kind, 30_000);
      step(context, record, `stop ${node.name}; its records and the others' are lost while deletions aim at it`);
      await node.stop();
      const ops = [
        workload.deleteOne(record.kind, { node: node.name }),
        workload.create(record.kind, { prefer: node.name }),
      ];
      const losses: string[] = [];
      const lose = async (what: string, action: () => Promise<unknown>) => {
        try {
          await action();
          losses.push(what);
        } catch (error) {
          if (!(error instanceof WorkflowNotFoundError)) throw error;
        }
      };
      const recordOf = (nodeId: string) =>
        client.workflow.getHandle(nodeRecordWorkflowId(cluster.config.driverName, nodeId));
      for (const other of cluster.nodes)
        await lose(`renew ${other.name}`, () => recordOf(other.name).signal(renewRecordSignal));
      await sleep(prng.int(500, 1500));
      ops.push(workload.deleteOne(record.kind, { node: node.name }));
      await lose(`reset ${node.name}`, () =>
        resetToFirstTask(client, nodeRecordWorkflowId(cluster.config.driverName, node.name), 'soak: record-loss'),
      );
      const live = prng.pick(cluster.nodes.filter((other) => other !== node));
      await lose(`terminate ${live.name}`, () => recordOf(live.name).terminate('soak: record-loss'));
      await lose(`terminate ${node.name}`, () => recordOf(node.name).terminate('soak: record-loss'));
      ops.push(workload.deleteOne(record.kind, { node: node.name }));
      ops.push(workload.deleteSnapshotOne(record.kind, { node: node.name }));
      const ids = ops.flatMap((op) => (op ? [op.id] : []));
      record.issuedOps.push(...ids);
      // Longer than the controllers' call wait, so each deletion is answered ABORTED at least once.
      await sleep(prng.int(4000, 7000));
      step(context, record, `start ${node.name} (${losses.length} records lost: ${losses.join(', ')})`);
      await node.start(context.builds.current);
      record.details = { node: node.name, losses, opsAimedAtDownNode: ids };
    } finally {
      await connection.close();
    }
  },
};
