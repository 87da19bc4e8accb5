import net from 'node:net';
import { waitUntilReady } from '../../../agent/wait-ready';
import type { FaultContext, FaultRecord } from './types';
import { awaitOps, sleep, step } from './types';

/** Driver process IDs and the count of unexpected exits, taken before an outage of Temporal or its database. */
export function snapshotDriver(context: FaultContext) {
  return {
    pids: new Map(context.cluster.all().map((process) => [process.name, process.pid])),
    exits: context.cluster.unexpectedExits.length,
  };
}

/**
 * After Temporal (or a part of it) is back: every driver process must be the same process as before and ready,
 * and a create preferring each node must land on that node (a probe says little about a node's worker).
 */
export async function probeAfterOutage(
  context: FaultContext,
  record: FaultRecord,
  before: ReturnType<typeof snapshotDriver>,
): Promise<Record<string, unknown>> {
  const { cluster, workload } = context;
  const backAt = Date.now();
  step(context, record, 'Temporal is back; probing every driver process');
  const processes = await Promise.all(
    cluster.all().map(async (process) => {
      const survived = process.pid !== undefined && process.pid === before.pids.get(process.name);
      let ready = 'ready';
      try {
        await waitUntilReady(process.endpoint, 90_000);
      } catch (error) {
        ready = error instanceof Error ? error.message : String(error);
      }
      return { process: process.name, survived, ready, afterMs: Date.now() - backAt };
    }),
  );
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
    .slice(before.exits)
    .map((exit) => `${exit.process} (${exit.signal ?? exit.code})`);
  step(
    context,
    record,
    `survived: ${processes.filter((p) => p.survived).length}/${processes.length}; died: ${died.join(', ') || 'none'}`,
  );
  return { processes, served, died };
}

/** Resolves once nothing accepts connections at host:port (the server has really stopped). */
export async function untilRefused(address: string, timeoutMs: number): Promise<void> {
  const [host, port] = [
    address.slice(0, address.lastIndexOf(':')),
    Number(address.slice(address.lastIndexOf(':') + 1)),
  ];
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, host, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (!open) return;
    await sleep(200);
  }
  throw new Error(`Temporal at ${address} still accepts connections ${timeoutMs} ms after it was stopped`);
}
