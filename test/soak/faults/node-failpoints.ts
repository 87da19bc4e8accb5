import { FAILPOINT_NAMES, type Failpoint } from '../../../agent/failpoints';
import type { DriverProcess } from '../cluster';
import type { Fault, FaultContext, FaultRecord } from './types';
import { step } from './types';

/** The crash failpoints: snapshot.slow-copy only slows a copy (test-only), it kills nothing. */
const VOLUME_FAILPOINTS = FAILPOINT_NAMES.filter((name) => name !== 'snapshot.slow-copy');

interface Outcome {
  node: string;
  failpoint: Failpoint;
  /** The operation aimed at the armed agent to trigger it (others may have got there first). */
  op?: number;
  died: string;
  restartedAfterMs?: number;
}

/** Restarts an agent with one failpoint armed, aims an operation at it, waits for it to SIGKILL itself, restarts it clean. */
async function armAndTrigger(
  context: FaultContext,
  record: FaultRecord,
  node: DriverProcess,
  failpoint: Failpoint,
): Promise<Outcome> {
  const { workload } = context;
  const needsVolume = failpoint.startsWith('delete') || failpoint.startsWith('snapshot');
  if (needsVolume) await workload.ensureOn(node.name, 1, record.kind, 30_000);
  step(context, record, `restart ${node.name} with failpoint ${failpoint}`);
  await node.start(context.builds.current, { failpoints: failpoint });
  const fallback = () => workload.create(record.kind, { prefer: node.name });
  const op = failpoint.startsWith('delete')
    ? (workload.deleteOne(record.kind, { node: node.name }) ?? fallback())
    : failpoint.startsWith('snapshot')
      ? (workload.snapshotOne(record.kind, { node: node.name }) ?? fallback())
      : fallback();
  record.issuedOps.push(op.id);
  const since = Date.now();
  const exit = await node.waitExit(45_000);
  const died = exit ? String(exit.signal ?? exit.code) : 'did not die within 45 s';
  step(context, record, `${node.name} (${failpoint}): ${died}; restart it without failpoints`);
  await node.start(context.builds.current);
  return { node: node.name, failpoint, op: op.id, died, restartedAfterMs: Date.now() - since };
}

/**
 * SIGKILL of node agents inside their activities: before allocating, after allocating but before answering,
 * before and after deleting, after a snapshot's copy and record are made but before answering. Each failpoint goes to a different node (in parallel); with fewer nodes than
 * failpoints, a node takes its share one after another.
 */
export const nodeFailpoints: Fault = {
  kind: 'node-failpoints',
  plannedOps: () => VOLUME_FAILPOINTS.length * 2,
  async run(context, record) {
    const failpoints = context.prng.shuffle(VOLUME_FAILPOINTS);
    const nodes = context.prng.shuffle(context.cluster.nodes);
    const byNode = new Map<DriverProcess, Failpoint[]>();
    failpoints.forEach((failpoint, index) => {
      const node = nodes[index % nodes.length] as DriverProcess;
      byNode.set(node, [...(byNode.get(node) ?? []), failpoint]);
    });
    const outcomes = await Promise.all(
      [...byNode.entries()].map(async ([node, list]) => {
        const results: Outcome[] = [];
        for (const failpoint of list) results.push(await armAndTrigger(context, record, node, failpoint));
        return results;
      }),
    );
    record.details.failpoints = outcomes.flat();
  },
};
