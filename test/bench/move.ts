/**
 * How long a move takes, phase by phase: `node dist/test/bench/move.js [--gib 1] [--fs xfs-reflink|ext4]
 * [--volumes 1] [--parallel 4] [--backend loop|dir] [--files 1]`. Its own Temporal dev server, a controller (no Kubernetes: the move ends `copied`,
 * the switch is the e2e's) and two agents on loop pools, each pool on a filesystem of its own (`xfs-reflink`: the
 * move's snapshot is a reflink; `ext4`: a full copy), serving copies on loopback. Each volume is a block volume of
 * --gib GiB of random bytes (no chunk of zeros, so every byte crosses). With --volumes N, N such volumes move at once
 * `--parallel` at a time, as `nodes evacuate` runs them. Prints, per move, the time of each phase from the workflow's
 * history (an activity's scheduled to completed), and the whole move in MiB/s of the volume's size. With
 * `--backend dir` the pools are dir pools and each volume a directory holding --gib GiB of random bytes in --files
 * files (the move packs its tree into an archive and extracts it on the target).
 */
import { randomFillSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { temporal as temporal_api } from '@temporalio/proto';
import { moveWorkflowId, parseVolumeId } from '../../common/names';
import { runEvacuation } from '../../operations/move-operations';
import { startDevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster } from '../support/cluster';
import { MiB, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { BLOCK_CAPABILITY } from '../integration/node-helpers';
import { mountPoolFilesystem, releaseMountsUnder, type PoolFilesystem } from '../unit/storage/mount-helpers';

const GiB = 1024 ** 3;

function option(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? (process.argv[at + 1] ?? fallback) : fallback;
}

/** Writes `bytes` of random data into the volume's image, 4 MiB at a time, and syncs it. */
function fill(image: string, bytes: number): void {
  const fd = fs.openSync(image, 'r+');
  const chunk = Buffer.alloc(4 * MiB);
  for (let at = 0; at < bytes; at += chunk.length) fs.writeSync(fd, randomFillSync(chunk), 0, chunk.length, at);
  fs.fsyncSync(fd);
  fs.closeSync(fd);
}

/** Writes `bytes` of random data into the dir volume's directory, as `files` files of about equal size, synced. */
function fillTree(dir: string, bytes: number, files: number): void {
  const each = Math.ceil(bytes / files);
  const chunk = Buffer.alloc(Math.min(4 * MiB, each));
  for (let n = 0; n < files; n++) {
    const fd = fs.openSync(path.join(dir, `file-${n}`), 'w');
    for (let at = 0; at < each; at += chunk.length) fs.writeSync(fd, randomFillSync(chunk), 0, chunk.length);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
  }
}

/** Each activity type's time, scheduled to completed (its last attempt), in seconds, in history order. */
function phaseTimes(history: temporal_api.api.history.v1.IHistory): [string, number][] {
  const scheduled = new Map<string, { type: string; at: number }>();
  const times: [string, number][] = [];
  const seconds = (time: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
    Number(time?.seconds ?? 0) + (time?.nanos ?? 0) / 1e9;
  for (const event of history.events ?? []) {
    const id = String(event.eventId);
    const attributes = event.activityTaskScheduledEventAttributes;
    if (attributes) scheduled.set(id, { type: attributes.activityType?.name ?? '?', at: seconds(event.eventTime) });
    const done = event.activityTaskCompletedEventAttributes;
    const start = done && scheduled.get(String(done.scheduledEventId));
    if (start) times.push([start.type, seconds(event.eventTime) - start.at]);
  }
  return times;
}

async function main(): Promise<void> {
  const gib = Number(option('gib', '1'));
  const kind = option('fs', 'xfs-reflink') as PoolFilesystem;
  const count = Number(option('volumes', '1'));
  const parallel = Number(option('parallel', '4'));
  const backend = option('backend', 'loop') as 'loop' | 'dir';
  const files = Number(option('files', '1'));
  const bytes = Math.round(gib * GiB);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-bench-move-'));
  const server = await startDevServer({ dataDir, port: await findFreePort(), headless: true });
  process.env.DURABLE_CSI_TEST_TEMPORAL = server.address;
  process.env.DURABLE_CSI_KEEP_TEST_DATA = '1'; // the pools' filesystems are unmounted before the root goes
  const cluster = new TestCluster('bench-move', { logLevel: 'info' });
  try {
    // Each pool on its own filesystem, room for the volumes, the move's snapshot and the staged copy (dir: and the
    // archive on each side).
    const poolBytes = Math.ceil((count * bytes * (backend === 'dir' ? 3.2 : 2.2)) / GiB) * GiB + GiB;
    for (const nodeId of ['node-a', 'node-b']) {
      mountPoolFilesystem(kind, path.join(cluster.root, `${nodeId}.img`), cluster.pool(nodeId), poolBytes);
      const extra = ['--transfer-port', String(await findFreePort()), '--transfer-address', '127.0.0.1'];
      await cluster.startNode(nodeId, { backend, capacity: String(poolBytes - GiB), extra });
    }
    const controller = await cluster.startController('controller', ['--snapshots']);
    const csi = cluster.csi(controller.endpoint);
    const volumes: string[] = [];
    for (let n = 0; n < count; n++) {
      const request = createRequest(`pvc-bench-${n}`, bytes, {
        ...onNode('node-a'),
        ...(backend === 'loop' ? { volume_capabilities: [BLOCK_CAPABILITY] } : {}),
      });
      const volumeId = (await retryLikeCo(() => createVolume(csi, request))).volume!.volume_id;
      const dir = path.join(cluster.pool('node-a'), 'volumes', parseVolumeId(volumeId)!.key);
      if (backend === 'dir') fillTree(dir, bytes, files);
      else fill(path.join(dir, 'disk.img'), bytes);
      volumes.push(volumeId);
    }
    const temporal = await cluster.temporal();
    const plan = volumes.map((volumeId) => ({ volumeId, capacityBytes: bytes, targetNodeId: 'node-b' }));
    const started = Date.now();
    const results = await runEvacuation(temporal, cluster.driverName, plan, parallel, () => undefined);
    const totalMs = Date.now() - started;
    const failed = results.filter((result) => result.error);
    if (failed.length > 0) throw new Error(`moves failed: ${failed.map((result) => result.error).join('; ')}`);
    process.stdout.write(
      `move bench: ${count} ${backend} volume(s) of ${gib} GiB${backend === 'dir' ? ` in ${files} file(s)` : ''}, ` +
        `pools on ${kind}, ${parallel} at a time, ${os.cpus().length} CPUs, ` +
        `load average ${os.loadavg()[0]!.toFixed(1)}\n`,
    );
    for (const volumeId of volumes.slice(0, 3)) {
      const history = await temporal.workflow.getHandle(moveWorkflowId(cluster.driverName, volumeId)).fetchHistory();
      const times = phaseTimes(history);
      const whole = times.reduce((sum, [, s]) => sum + s, 0);
      process.stdout.write(`  ${volumeId}\n`);
      for (const [type, s] of times) process.stdout.write(`    ${type.padEnd(22)} ${s.toFixed(2)} s\n`);
      process.stdout.write(`    ${'(activities in all)'.padEnd(22)} ${whole.toFixed(2)} s\n`);
    }
    const mib = (count * bytes) / MiB;
    process.stdout.write(
      `  all ${count}: ${(totalMs / 1000).toFixed(1)} s from the first start to the last end, ` +
        `${(mib / (totalMs / 1000)).toFixed(0)} MiB/s of volume moved\n`,
    );
  } finally {
    try {
      await cluster.teardown();
      releaseMountsUnder(cluster.root);
      fs.rmSync(cluster.root, { recursive: true, force: true });
    } finally {
      await server.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
