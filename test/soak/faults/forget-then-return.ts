import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { readNodeRecord } from '../../../node-records/reads';
import { connectionOptions } from '../../../temporal/config';
import { parseSnapshotId, parseVolumeId } from '../../../common/names';
import { forgetNode } from '../../../operations/forget-node';
import type { Fault } from './types';
import { awaitOps, sleep, step } from './types';

/**
 * An operator forgets a node that is down (`nodes forget`), deletions of its volumes are answered OK (written
 * off: the CO is told they are gone), and then the node comes back with the same pool. Every written-off volume
 * must be deleted on its disk for real: the fault checks the pool itself once the node is back, and the audit's
 * leak check sees any that stayed. The same for snapshots: DeleteSnapshot of the node's snapshots is answered OK
 * (written off) while it is forgotten, and their copies (snapshots/data/<key>) must be gone once it is back, and so
 * must every member copy of a group snapshot whose DeleteVolumeGroupSnapshot was answered OK meanwhile. Deletions
 * acknowledged while the node was forgotten are the operator's decision, not a false "deleted" (the model's `forgotten` windows exempt them from that check).
 */
export const forgetThenReturn: Fault = {
  kind: 'forget-then-return',
  plannedOps: () => 14,
  async run(context, record) {
    const { cluster, workload, prng } = context;
    const connection = await Connection.connect(connectionOptions(context.temporal.config));
    const client = new Client({ connection });
    const driverName = cluster.config.driverName;
    const node = prng.pick(cluster.nodes);
    let window: { node: string; from: number; to?: number } | undefined;
    try {
      const count = prng.int(2, 5);
      const snapshots = prng.int(1, 2);
      await workload.ensureSnapshotsOn(node.name, snapshots, record.kind, 60_000);
      await workload.ensureGroupsOn(node.name, 1, record.kind, 60_000);
      await workload.ensureOn(node.name, count, record.kind, 60_000);
      step(context, record, `SIGKILL ${node.name}, wait until its record sees it offline, forget it`);
      await node.kill('SIGKILL');
      const offlineBy = Date.now() + 90_000;
      while ((await readNodeRecord(client, driverName, node.name))?.node?.live !== false && Date.now() < offlineBy)
        await sleep(1000);
      window = { node: node.name, from: Date.now() };
      workload.model.forgotten.push(window);
      let released = 0;
      for (let attempt = 0; ; attempt++) {
        try {
          released = (await forgetNode(client, driverName, node.name, 'soak: forget-then-return')).released.length;
          break;
        } catch (error) {
          if (attempt >= 10) throw error; // the record decides once a controller runs it
          await sleep(3000);
        }
      }
      const ops = Array.from({ length: count }, () => workload.deleteOne(record.kind, { node: node.name }));
      ops.push(
        ...Array.from({ length: snapshots }, () => workload.deleteSnapshotOne(record.kind, { node: node.name })),
        workload.deleteGroupOne(record.kind, { node: node.name }),
      );
      const ids = ops.flatMap((op) => (op ? [op.id] : []));
      record.issuedOps.push(...ids);
      const unfinished = await awaitOps(context, ids, 60_000);
      const writtenOff = workload.model.ops
        .filter((op) => op.kind === 'delete' && op.outcome === 'ok' && op.node === node.name)
        .filter((op) => (op.endedAt ?? 0) >= (window?.from ?? 0))
        .flatMap((op) => (op.volumeId ? [op.volumeId] : []));
      const snapshotsWrittenOff = workload.model.ops
        .filter((op) => op.kind === 'snapshot-delete' && op.outcome === 'ok' && op.node === node.name)
        .filter((op) => (op.endedAt ?? 0) >= (window?.from ?? 0))
        .flatMap((op) => (op.snapshotId ? [op.snapshotId] : []));
      const groupsWrittenOff = workload.model.ops
        .filter((op) => op.kind === 'group-delete' && op.outcome === 'ok' && op.node === node.name)
        .filter((op) => (op.endedAt ?? 0) >= (window?.from ?? 0));
      const keys = writtenOff.flatMap((volumeId) => parseVolumeId(volumeId)?.key ?? []);
      const snapshotKeys = [...snapshotsWrittenOff, ...groupsWrittenOff.flatMap((op) => op.memberIds ?? [])].flatMap(
        (snapshotId) => parseSnapshotId(snapshotId)?.key ?? [],
      );
      const pool = cluster.pool(node.name);
      const onDisk = () => [
        ...keys.filter((key) => fs.existsSync(path.join(pool, 'volumes', key))),
        ...snapshotKeys
          .filter(
            (key) =>
              fs.existsSync(path.join(pool, 'snapshots', 'data', key)) ||
              fs.existsSync(path.join(pool, 'snapshots', 'records', `${key}.json`)),
          )
          .map((key) => `snapshot ${key}`),
      ];
      const total = keys.length + snapshotKeys.length;
      step(
        context,
        record,
        `${released} waiting released, ${writtenOff.length} volumes, ${snapshotsWrittenOff.length} snapshots and ` +
          `${groupsWrittenOff.length} group snapshots (${snapshotKeys.length - snapshotsWrittenOff.length} members) ` +
          `written off (${onDisk().length} still on disk, ${unfinished} unanswered); start ${node.name} with the same pool`,
      );
      await node.start(context.builds.current);
      const backBy = Date.now() + 120_000;
      while ((await readNodeRecord(client, driverName, node.name))?.node?.live !== true && Date.now() < backBy)
        await sleep(1000);
      window.to = Date.now();
      while (onDisk().length > 0 && Date.now() < backBy) await sleep(1000);
      const left = onDisk();
      step(context, record, `${total - left.length} of ${total} written-off volumes, snapshots and members deleted`);
      record.details = {
        node: node.name,
        released,
        writtenOff,
        snapshotsWrittenOff,
        groupsWrittenOff: groupsWrittenOff.map((op) => op.groupSnapshotId),
        stillOnDisk: left,
        unanswered: unfinished,
      };
      if (left.length > 0)
        throw new Error(`written-off volumes or snapshots still on ${node.name}: ${left.join(', ')}`);
    } finally {
      if (!node.alive()) await node.start(context.builds.current);
      if (window) window.to ??= Date.now();
      await connection.close();
    }
  },
};
