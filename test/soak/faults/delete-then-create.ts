import type { OpRecord } from '../model';
import type { Fault, FaultContext } from './types';
import { awaitOps, sleep, step } from './types';

/** Until a deletion has been answered ABORTED once: its workflow runs (the CO would retry the name only now). */
async function untilWaiting(context: FaultContext, deletion: OpRecord, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if ((deletion.codes.ABORTED ?? 0) > 0) return true;
    if (deletion.endedAt !== undefined) return false;
    await sleep(250);
  }
  return false;
}

/**
 * What external-provisioner does when saving a PV fails after a successful create: it deletes the volume and
 * retries the same name. The volume's node is down (SIGTERM), so each deletion waits; the re-creates must not be
 * answered with the volumes those deletions remove when the node returns (a PV for a gone volume: the audit
 * reports it lost, the model an anomaly). They answer ABORTED while the deletion waits, a new volume after.
 */
export const deleteThenCreate: Fault = {
  kind: 'delete-then-create',
  plannedOps: () => 9,
  async run(context, record) {
    const { workload, prng } = context;
    const node = prng.pick(context.cluster.nodes);
    const count = prng.int(2, 3);
    await workload.ensureOn(node.name, count, record.kind, 60_000);
    step(context, record, `stop ${node.name}; delete ${count} of its volumes, then create their names again`);
    await node.stop();
    const deletions = Array.from({ length: count }, () => workload.deleteOne(record.kind, { node: node.name })).filter(
      (op): op is OpRecord => op !== undefined,
    );
    record.issuedOps.push(...deletions.map((op) => op.id));
    const waiting = await Promise.all(deletions.map((op) => untilWaiting(context, op, 30_000)));
    const recreates = deletions.filter((_, index) => waiting[index]).map((op) => workload.recreate(record.kind, op));
    record.issuedOps.push(...recreates.map((op) => op.id));
    // Long enough for each re-create to be answered (ABORTED) more than once while its deletion waits.
    await sleep(prng.int(6000, 10_000));
    const answered = recreates.filter((op) => op.endedAt !== undefined).length;
    step(
      context,
      record,
      `start ${node.name}; ${answered} of ${recreates.length} re-creates answered while it was down`,
    );
    await node.start(context.builds.current);
    const ids = [...deletions, ...recreates].map((op) => op.id);
    const stillRunning = await awaitOps(context, ids, 90_000);
    step(context, record, `${ids.length - stillRunning} of ${ids.length} operations finished after its return`);
    record.details = {
      node: node.name,
      deletions: deletions.map((op) => ({ op: op.id, volumeId: op.volumeId })),
      recreates: recreates.map((op) => ({ op: op.id, answered: op.volumeId, codes: op.codes })),
      answeredWhileDown: answered,
      stillRunning,
    };
  },
};
