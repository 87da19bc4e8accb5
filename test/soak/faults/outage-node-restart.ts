import { waitUntilProbeAnswers } from '../../../agent/wait-ready';
import { probeAfterOutage, snapshotDriver, untilRefused } from './after-outage';
import type { Fault } from './types';
import { step } from './types';

/**
 * Node agents restart (SIGKILL, as a reboot) while Temporal is down: each must come back serving CSI at once
 * (Probe answers, not ready) and stay up through the rest of the outage, deletions of its volumes issued
 * meanwhile must wait, and once Temporal is back every process must be ready and serve a create aimed at it.
 */
export const outageNodeRestart: Fault = {
  kind: 'outage-node-restart',
  plannedOps: (options) => options.nodes + 4,
  async run(context, record) {
    const { cluster, workload, prng } = context;
    const nodes = prng.shuffle(cluster.nodes).slice(0, Math.min(cluster.nodes.length, prng.int(1, 2)));
    for (const node of nodes) await workload.ensureOn(node.name, 2, record.kind, 30_000);
    const signal = prng.chance(0.5) ? 'SIGKILL' : 'SIGTERM';
    const downMs = prng.int(20_000, 30_000);
    step(
      context,
      record,
      `${signal} the Temporal server for ${downMs} ms; restart ${nodes.map((n) => n.name).join(', ')} meanwhile`,
    );
    const outage = context.temporal.restart(signal, downMs);
    await untilRefused(context.temporal.address, 15_000);

    const served: Record<string, unknown>[] = [];
    for (const node of nodes) {
      step(context, record, `SIGKILL ${node.name} and start it again while Temporal is down`);
      await node.kill('SIGKILL');
      const startedAt = Date.now();
      await node.start(context.builds.current, { waitReady: false });
      const ready = await waitUntilProbeAnswers(node.endpoint, 20_000);
      served.push({ node: node.name, probeAnsweredAfterMs: Date.now() - startedAt, ready });
      const ops = [
        workload.deleteOne(record.kind, { node: node.name }),
        workload.create(record.kind, { prefer: node.name }),
      ];
      record.issuedOps.push(...ops.flatMap((op) => (op ? [op.id] : [])));
    }
    // The restarted agents must live through the rest of the outage (not exit for want of Temporal).
    const before = snapshotDriver(context);
    await outage;
    record.details = {
      signal,
      downMs,
      servedDuringOutage: served,
      ...(await probeAfterOutage(context, record, before)),
    };
  },
};
