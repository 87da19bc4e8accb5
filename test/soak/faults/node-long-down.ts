import type { Fault } from './types';
import { awaitOps, sleep, step } from './types';

/**
 * One node down for a long window (past the registry's 30 s liveness) while deletions of its volumes pile up
 * and creates prefer it, a snapshot of one of its volumes is asked for (ABORTED until the copy is recorded), one
 * of its snapshots is deleted (ABORTED until its pool confirms) and another restored (it can only land there), and
 * the same for groups: one of its group snapshots deleted, a group of its volumes asked for, another group asked
 * for by GetVolumeGroupSnapshot (UNAVAILABLE while it is down, never NOT_FOUND); then it comes back and every
 * waiting operation must finish.
 */
export const nodeLongDown: Fault = {
  kind: 'node-long-down',
  plannedOps: () => 25,
  async run(context, record) {
    const { workload, prng, options } = context;
    const node = prng.pick(context.cluster.nodes);
    const count = prng.int(4, 8);
    await workload.ensureSnapshotsOn(node.name, 2, record.kind, 60_000);
    await workload.ensureGroupsOn(node.name, 2, record.kind, 60_000);
    // The deletions' volumes, a create's, and 2 or 3 for a group asked for while the node is down.
    await workload.ensureOn(node.name, count + 4, record.kind, 60_000);
    const signal = prng.chance(0.5) ? 'SIGKILL' : 'SIGTERM';
    step(context, record, `${signal} ${node.name}; down for ${options.longDownMs / 1000} s`);
    if (signal === 'SIGKILL') await node.kill('SIGKILL');
    else await node.stop();
    const downAt = Date.now();
    const piled: number[] = [];
    const interval = options.longDownMs / (count + 1);
    for (let index = 0; index < count; index++) {
      await sleep(interval);
      const op = workload.deleteOne(record.kind, { node: node.name });
      if (op) piled.push(op.id);
      if (index % 3 === 2) piled.push(workload.create(record.kind, { prefer: node.name }).id);
      const snapshotOp =
        index === 0
          ? workload.deleteSnapshotOne(record.kind, { node: node.name })
          : index === 1
            ? workload.snapshotOne(record.kind, { node: node.name })
            : index === 2
              ? workload.restoreOne(record.kind, { node: node.name })
              : undefined;
      if (snapshotOp) piled.push(snapshotOp.id);
      const groupOp =
        index === 0
          ? workload.deleteGroupOne(record.kind, { node: node.name })
          : index === 1
            ? workload.groupOne(record.kind, { node: node.name })
            : index === 2
              ? workload.getGroupOne(record.kind, { node: node.name })
              : undefined;
      if (groupOp) piled.push(groupOp.id);
    }
    record.issuedOps.push(...piled);
    await sleep(Math.max(0, downAt + options.longDownMs - Date.now()));
    const waiting = context.workload.model.ops.filter((op) => piled.includes(op.id) && op.endedAt === undefined);
    step(
      context,
      record,
      `start ${node.name}; ${waiting.length} of ${piled.length} operations aimed at it still waiting`,
    );
    await node.start(context.builds.current);
    const backAt = Date.now();
    const stillRunning = await awaitOps(context, piled, 90_000);
    step(
      context,
      record,
      `${piled.length - stillRunning} of ${piled.length} finished ${Math.round((Date.now() - backAt) / 1000)} s after its return`,
    );
    record.details = {
      node: node.name,
      signal,
      downMs: backAt - downAt,
      piled,
      waitingAtReturn: waiting.length,
      stillRunning,
    };
  },
};
