import { waitUntilReady } from '../../../agent/wait-ready';
import type { Fault } from './types';
import { awaitOps, step } from './types';

/**
 * The Temporal server itself goes away (SIGTERM or SIGKILL) and comes back on the same database and port. Every
 * driver process must survive it and serve again: each is probed, and a create aimed at each node must land there.
 */
export const temporalRestart: Fault = {
  kind: 'temporal-restart',
  plannedOps: (options) => options.nodes,
  async run(context, record) {
    const { cluster, prng, workload } = context;
    const signal = prng.chance(0.5) ? 'SIGKILL' : 'SIGTERM';
    const downMs = prng.int(3000, 15_000);
    const before = new Map(cluster.all().map((process) => [process.name, process.pid]));
    const exitsBefore = cluster.unexpectedExits.length;
    step(context, record, `${signal} the Temporal server; start it again on the same database after ${downMs} ms`);
    await context.temporal.restart(signal, downMs);
    const backAt = Date.now();
    step(context, record, 'Temporal is back; probing every driver process');
    const processes = await Promise.all(
      cluster.all().map(async (process) => {
        const survived = process.pid !== undefined && process.pid === before.get(process.name);
        let ready = 'ready';
        try {
          await waitUntilReady(process.endpoint, 90_000);
        } catch (error) {
          ready = error instanceof Error ? error.message : String(error);
        }
        return { process: process.name, survived, ready, afterMs: Date.now() - backAt };
      }),
    );
    // Probe says little about a node's worker: a create preferring each node must be placed on it.
    const probes = cluster.nodes.map((node) => ({
      node: node.name,
      op: workload.create(record.kind, { prefer: node.name }),
    }));
    record.issuedOps.push(...probes.map((probe) => probe.op.id));
    await awaitOps(
      context,
      probes.map((probe) => probe.op.id),
      120_000,
    );
    const served = probes.map(({ node, op }) => ({
      node,
      op: op.id,
      placedOn: op.outcome === 'ok' ? op.volumeId?.split('_')[1] : `not done (${op.outcome ?? 'running'})`,
    }));
    const died = cluster.unexpectedExits
      .slice(exitsBefore)
      .map((exit) => `${exit.process} (${exit.signal ?? exit.code})`);
    step(
      context,
      record,
      `survived: ${processes.filter((p) => p.survived).length}/${processes.length}; died: ${died.join(', ') || 'none'}`,
    );
    record.details = { signal, downMs, processes, served, died };
  },
};
