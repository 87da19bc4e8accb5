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
 *
 * Snapshot names are used again the same way (issue 33): one or two of the node's snapshots are deleted while it is
 * down and created again with the same name and source. Each re-create must answer a retriable error until its
 * deletion has ended, then a new snapshot (a new ID, a new copy the earlier deletion does not touch); answered with
 * the doomed ID, the model keeps it held and the audit reports it lost once the deletion removed the copy. The first
 * re-created snapshot is then deleted once more, with its node up: an OK that leaves the copy on disk (a deletion
 * answered from the earlier one's run) is a leaked copy in the audit.
 */
export const deleteThenCreate: Fault = {
  kind: 'delete-then-create',
  plannedOps: () => 14,
  async run(context, record) {
    const { workload, prng } = context;
    const node = prng.pick(context.cluster.nodes);
    const count = prng.int(2, 3);
    const snapshotCount = prng.int(1, 2);
    await workload.ensureOn(node.name, count + snapshotCount, record.kind, 60_000);
    // Made now, their sources held: the volume deletions below leave them alone, and the names can be asked for again.
    const snapshots = await workload.snapshotsForRecreate(node.name, snapshotCount, record.kind, 60_000);
    step(
      context,
      record,
      `stop ${node.name}; delete ${count} of its volumes and ${snapshots.length} of its snapshots, then create their names again`,
    );
    await node.stop();
    const snapshotDeletions = snapshots.map((snapshot) => workload.deleteSnapshotForRecreate(snapshot, record.kind));
    const deletions = Array.from({ length: count }, () => workload.deleteOne(record.kind, { node: node.name })).filter(
      (op): op is OpRecord => op !== undefined,
    );
    record.issuedOps.push(...[...snapshotDeletions, ...deletions].map((op) => op.id));
    const waiting = await Promise.all(deletions.map((op) => untilWaiting(context, op, 30_000)));
    const snapshotWaiting = await Promise.all(snapshotDeletions.map((op) => untilWaiting(context, op, 30_000)));
    const recreates = deletions.filter((_, index) => waiting[index]).map((op) => workload.recreate(record.kind, op));
    // A deletion not seen waiting (it ended, or never answered ABORTED) gets no re-create: resnapshot would hold the
    // name for both, so the name and its source are released with the deletion instead.
    const resnapshots = snapshotDeletions.flatMap((op, index) => {
      if (snapshotWaiting[index]) return [workload.resnapshot(record.kind, op)];
      workload.releaseSnapshotDeletion(op);
      return [];
    });
    record.issuedOps.push(...[...recreates, ...resnapshots].map((op) => op.id));
    // Long enough for each re-create to be answered (ABORTED) more than once while its deletion waits.
    await sleep(prng.int(6000, 10_000));
    const answered = recreates.filter((op) => op.endedAt !== undefined).length;
    const snapshotsAnswered = resnapshots.filter((op) => op.endedAt !== undefined).length;
    step(
      context,
      record,
      `start ${node.name}; answered while it was down: ${answered} of ${recreates.length} volume re-creates, ` +
        `${snapshotsAnswered} of ${resnapshots.length} snapshot re-creates`,
    );
    await node.start(context.builds.current);
    const ids = [...deletions, ...recreates, ...snapshotDeletions, ...resnapshots].map((op) => op.id);
    const stillRunning = await awaitOps(context, ids, 90_000);
    step(context, record, `${ids.length - stillRunning} of ${ids.length} operations finished after its return`);
    // The first re-created snapshot, deleted again with its node up: it must really go.
    const again = resnapshots.find((op) => op.outcome === 'ok' && op.snapshotId !== undefined);
    const second = again ? workload.deleteSnapshotOf(again.name, record.kind) : undefined;
    if (second) {
      record.issuedOps.push(second.id);
      const left = await awaitOps(context, [second.id], 60_000);
      step(
        context,
        record,
        `deleted the re-created snapshot ${second.snapshotId} again: ${left ? 'not done' : 'done'}`,
      );
    }
    record.details = {
      node: node.name,
      deletions: deletions.map((op) => ({ op: op.id, volumeId: op.volumeId })),
      recreates: recreates.map((op) => ({ op: op.id, answered: op.volumeId, codes: op.codes })),
      snapshotDeletions: snapshotDeletions.map((op) => ({ op: op.id, snapshotId: op.snapshotId, codes: op.codes })),
      snapshotRecreates: resnapshots.map((op) => ({ op: op.id, answered: op.snapshotId, codes: op.codes })),
      deletedAgain: second ? { op: second.id, snapshotId: second.snapshotId, outcome: second.outcome } : undefined,
      answeredWhileDown: answered,
      snapshotsAnsweredWhileDown: snapshotsAnswered,
      stillRunning,
    };
  },
};
