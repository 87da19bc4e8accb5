import type { Fault } from './types';
import { sleep, step } from './types';

/**
 * A DaemonSet rollout: each node agent in turn is stopped (SIGTERM) and replaced. While it is down, deletions of
 * its volumes arrive (the leak this driver exists to prevent) and a create prefers it.
 */
export const nodeRollout: Fault = {
  kind: 'node-rollout',
  plannedOps: (options) => options.nodes * 4,
  async run(context, record) {
    const { cluster, workload, prng } = context;
    const down: Record<string, number[]> = {};
    for (const node of cluster.nodes) {
      await workload.ensureOn(node.name, 2, record.kind, 30_000);
      step(context, record, `stop ${node.name}`);
      await node.stop();
      const ops = Array.from({ length: prng.int(1, 3) }, () => workload.deleteOne(record.kind, { node: node.name }));
      if (prng.chance(0.5)) ops.push(workload.create(record.kind, { prefer: node.name }));
      const ids = ops.flatMap((op) => (op ? [op.id] : []));
      record.issuedOps.push(...ids);
      down[node.name] = ids;
      // Longer than the controllers' call wait, so each deletion is answered ABORTED at least once.
      await sleep(prng.int(3500, 6500));
      step(context, record, `start ${node.name} (${ids.length} operations aimed at it while down)`);
      await node.start(context.builds.current);
    }
    record.details.opsAimedAtDownNode = down;
  },
};
