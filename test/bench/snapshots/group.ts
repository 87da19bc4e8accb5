/**
 * Group snapshot and restore times for three 1 GiB loop volumes on an XFS pool with reflinks, through the whole
 * driver (docs/snapshots.md, "Group snapshots"): its own Temporal dev server, a controller with --snapshots and
 * --call-wait 120s (a call waits for the copy), one node agent. Each volume is staged (ext4 mounted, so the group
 * freezes all three) and holds 512 MiB of random data, synced. Per round: CreateVolumeGroupSnapshot until OK, then
 * a CreateVolume from each member, then their deletion and the group's. Needs root and loop devices.
 * `npm run build && node dist/test/bench/snapshots/group.js [--rounds 3]`
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, withDeadline } from '../../../csi/client';
import type { CreateVolumeGroupSnapshotResponse__Output } from '../../../csi/generated/csi/v1/CreateVolumeGroupSnapshotResponse';
import { startDevServer } from '../../../temporal-dev/dev-server';
import { findFreePort } from '../../../temporal-dev/free-port';
import { TestCluster } from '../../support/cluster';
import { GiB, MiB, createRequest, createVolume, deleteVolume, onNode } from '../../support/csi-requests';
import { nodeRpcs } from '../../integration/node-helpers';
import { groupClient } from '../../replay/group-snapshot-scenarios';
import { makePoolFs } from './host';

const FILL_BYTES = 512 * MiB;

async function main(): Promise<number> {
  const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1] || 3) || 3;
  const cleanups: (() => Promise<void>)[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-groupbench-'));
  try {
    const poolFs = await makePoolFs(dir, 'xfs', 16 * GiB, cleanups);
    if (!poolFs.reflink) throw new Error('the XFS made with -m reflink=1 does not reflink');
    const server = await startDevServer({
      dataDir: path.join(dir, 'temporal'),
      port: await findFreePort(),
      headless: true,
    });
    cleanups.push(() => server.stop());
    process.env.DURABLE_CSI_TEST_TEMPORAL_CONFIG = JSON.stringify({
      address: server.address,
      namespace: server.namespace,
    });
    const cluster = new TestCluster('groupbench', { logLevel: 'info' });
    cleanups.push(() => cluster.teardown());
    const node = await cluster.startNode('group-xfs', {
      backend: 'loop',
      capacity: '14Gi',
      extra: ['--pool', poolFs.pool],
    });
    const controller = await cluster.startController('controller', ['--snapshots', '--call-wait', '120s']);
    const clients = cluster.csi(controller.endpoint);
    const group = groupClient(controller.endpoint);
    const rpcs = nodeRpcs(cluster.csi(node.endpoint));
    const volumes: string[] = [];
    for (const name of ['bench-a', 'bench-b', 'bench-c']) {
      const volumeId = (await createVolume(clients, createRequest(name, GiB, onNode('group-xfs')), 120_000)).volume!
        .volume_id;
      const staging = path.join(cluster.kubeletDir(), 'staging', name);
      fs.mkdirSync(staging, { recursive: true });
      await rpcs.stage(volumeId, staging);
      cleanups.push(async () => void (await rpcs.unstage(volumeId, staging)));
      const handle = fs.openSync(path.join(staging, 'data'), 'w');
      for (let written = 0; written < FILL_BYTES; written += 16 * MiB) fs.writeSync(handle, randomBytes(16 * MiB));
      fs.fsyncSync(handle);
      fs.closeSync(handle);
      volumes.push(volumeId);
    }
    const snapshotMs: number[] = [];
    const restoreMs: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      let started = Date.now();
      const made = await call<CreateVolumeGroupSnapshotResponse__Output>((done) =>
        group.CreateVolumeGroupSnapshot(
          { name: `bench-${round}`, source_volume_ids: volumes },
          withDeadline(150_000),
          done,
        ),
      );
      snapshotMs.push(Date.now() - started);
      const restored: string[] = [];
      started = Date.now();
      for (const member of made.group_snapshot!.snapshots) {
        const request = createRequest(`bench-restore-${round}-${restored.length}`, GiB, {
          volume_content_source: { snapshot: { snapshot_id: member.snapshot_id } },
        });
        restored.push((await createVolume(clients, request, 150_000)).volume!.volume_id);
      }
      restoreMs.push(Date.now() - started);
      process.stdout.write(
        `round ${round}: group snapshot ${snapshotMs.at(-1)} ms, 3 restores ${restoreMs.at(-1)} ms\n`,
      );
      for (const volumeId of restored) await deleteVolume(clients, volumeId, 60_000);
      const ids = made.group_snapshot!.snapshots.map((member) => member.snapshot_id);
      await call((done) =>
        group.DeleteVolumeGroupSnapshot(
          { group_snapshot_id: made.group_snapshot!.group_snapshot_id, snapshot_ids: ids },
          withDeadline(60_000),
          done,
        ),
      );
    }
    group.close();
    const summary = (values: number[]) => {
      const sorted = [...values].sort((a, b) => a - b);
      return `${sorted[Math.floor(sorted.length / 2)]} / ${sorted[0]} / ${sorted.at(-1)}`;
    };
    process.stdout.write(
      `three 1 GiB loop volumes (ext4, staged, ${FILL_BYTES / MiB} MiB of data each), XFS pool with reflinks, ` +
        `${rounds} rounds, load ${os.loadavg()[0]!.toFixed(2)}: group snapshot p50/min/max ${summary(snapshotMs)} ms; ` +
        `restore of the three members (one after the other) ${summary(restoreMs)} ms\n`,
    );
    return 0;
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}
