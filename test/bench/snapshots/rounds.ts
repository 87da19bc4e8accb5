/**
 * One pool's measurement: a 1 GiB raw block volume (the loop backend makes no filesystem on it, so the data
 * written straight into its image is not a filesystem the benchmark breaks), filled with non-zero data so that the
 * copies have real blocks to copy; then, per round, CreateSnapshot and CreateVolume from that snapshot through the
 * controller, with the blocks each copy takes, and both deleted again.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { call, withDeadline, type CsiClients } from '../../../csi/client';
import type { CreateSnapshotResponse__Output } from '../../../csi/generated/csi/v1/CreateSnapshotResponse';
import type { CreateVolumeRequest } from '../../../csi/generated/csi/v1/CreateVolumeRequest';
import { parseSnapshotId, parseVolumeId } from '../../../common/names';
import { createRequest, createVolume, deleteVolume, GiB, MiB, onNode, retryLikeCo } from '../../support/csi-requests';
import { blockBytes, dropCache, run, sharedBytes, usedBytes, type PoolFs } from './host';

export const VOLUME_BYTES = GiB;

export interface Round {
  /** CreateSnapshot, from the first call until it answered OK with ready_to_use. */
  snapshotMs: number;
  /** CreateVolume from that snapshot, until it answered OK. */
  restoreMs: number;
  /** st_blocks of the snapshot's image and of the restored volume's, in bytes (du). */
  snapshotBlockBytes: number;
  restoreBlockBytes: number;
  /** Bytes of the snapshot's image in extents shared with another file (filefrag: reflinks). */
  snapshotSharedBytes: number;
  /** What the pool's filesystem had in use more after the snapshot, and after the restore (statfs). */
  snapshotFsBytes: number;
  restoreFsBytes: number;
}

export interface PoolResult {
  kind: string;
  reflink: boolean;
  /** CreateVolume of the empty 1 GiB source (fallocate, no copy): the driver's cost without a copy. */
  createMs: number;
  /** Writing 1 GiB into the source image, fsync and sync included. */
  fillMs: number;
  rounds: Round[];
}

export interface Target {
  clients: CsiClients;
  nodeId: string;
  poolFs: PoolFs;
  rpcTimeoutMs: number;
  runId: string;
  progress: (message: string) => void;
  /**
   * Waits until the node's record (what placement reads) shows this much room, and answers how long that took. The
   * record's figures come with the agent's presence heartbeat (every 10 s): right after a round's deletes it still
   * shows their reservations, and a restore placed on it then is RESOURCE_EXHAUSTED.
   */
  awaitRoom: (bytes: number) => Promise<number>;
}

const BLOCK_CAPABILITY = [{ block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' as const } }];

function blockRequest(name: string, extra: Partial<CreateVolumeRequest> = {}): CreateVolumeRequest {
  return { ...createRequest(name, VOLUME_BYTES, extra), volume_capabilities: BLOCK_CAPABILITY };
}

function createSnapshot(clients: CsiClients, name: string, sourceVolumeId: string, timeoutMs: number) {
  return call<CreateSnapshotResponse__Output>((done) =>
    clients.controller.CreateSnapshot({ name, source_volume_id: sourceVolumeId }, withDeadline(timeoutMs), done),
  );
}

function deleteSnapshot(clients: CsiClients, snapshotId: string, timeoutMs: number) {
  return call<object>((done) =>
    clients.controller.DeleteSnapshot({ snapshot_id: snapshotId }, withDeadline(timeoutMs), done),
  );
}

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

const volumeImage = (pool: string, volumeId: string) => {
  const key = parseVolumeId(volumeId)?.key;
  if (!key) throw new Error(`unparseable volume ID ${volumeId}`);
  return path.join(pool, 'volumes', key, 'disk.img');
};

const snapshotImage = (pool: string, snapshotId: string) => {
  const key = parseSnapshotId(snapshotId)?.key;
  if (!key) throw new Error(`unparseable snapshot ID ${snapshotId}`);
  return path.join(pool, 'snapshots', 'data', key, 'disk.img');
};

/** Non-zero data over the whole image, written in place (the image keeps its preallocated blocks), then synced. */
async function fill(image: string): Promise<number> {
  const size = fs.statSync(image).size;
  if (size < VOLUME_BYTES) throw new Error(`${image} is ${size} bytes, not the ${VOLUME_BYTES} of the volume`);
  const { ms } = await timed(async () => {
    const chunk = crypto.randomBytes(MiB);
    const handle = await fs.promises.open(image, 'r+');
    try {
      for (let offset = 0; offset < size; offset += MiB) {
        chunk.writeUInt32LE(offset / MiB, 0); // no two MiB alike
        await handle.write(chunk, 0, Math.min(MiB, size - offset), offset);
      }
      await handle.sync();
    } finally {
      await handle.close();
    }
    await run('sync', ['-f', image]);
  });
  return ms;
}

/** A few MiB of the copy read back against the source: the copy holds the data, not just its size. */
function assertSameSamples(source: string, copy: string): void {
  const size = fs.statSync(source).size;
  const read = (file: string, offset: number) => {
    const buffer = Buffer.alloc(MiB);
    const handle = fs.openSync(file, 'r');
    try {
      fs.readSync(handle, buffer, 0, MiB, offset);
    } finally {
      fs.closeSync(handle);
    }
    return buffer;
  };
  for (const offset of [0, Math.floor(size / 2 / MiB) * MiB, size - MiB]) {
    if (!read(source, offset).equals(read(copy, offset)))
      throw new Error(`${copy} differs from ${source} at ${offset}`);
  }
}

/** Cold caches for each round: the source's pages and the pool's backing image's (both clean after a sync). */
async function coolDown(poolFs: PoolFs, sourceImage: string): Promise<void> {
  await run('sync', ['-f', poolFs.pool]);
  await dropCache(sourceImage);
  await dropCache(poolFs.image);
}

export async function measurePool(target: Target, rounds: number): Promise<PoolResult> {
  const { clients, nodeId, poolFs, rpcTimeoutMs, runId, progress } = target;
  const retry = <T>(attempt: () => Promise<T>) => retryLikeCo(attempt, 600_000);
  const name = (what: string) => `snapbench-${runId}-${poolFs.kind}-${what}`;

  const source = await timed(() =>
    retry(() => createVolume(clients, blockRequest(name('source'), onNode(nodeId)), rpcTimeoutMs)),
  );
  const sourceId = source.value.volume?.volume_id ?? '';
  const sourceImage = volumeImage(poolFs.pool, sourceId);
  progress(`${poolFs.kind}: filling ${sourceImage} with ${VOLUME_BYTES / MiB} MiB of random data`);
  const fillMs = await fill(sourceImage);
  const result: PoolResult = {
    kind: poolFs.kind,
    reflink: poolFs.reflink,
    createMs: source.ms,
    fillMs,
    rounds: [],
  };

  for (let round = 1; round <= rounds; round++) {
    const waitedMs = await target.awaitRoom(2 * VOLUME_BYTES);
    if (waitedMs > 0)
      progress(`${poolFs.kind} round ${round}: waited ${waitedMs} ms for the node's record to show room`);
    await coolDown(poolFs, sourceImage);
    const beforeSnapshot = usedBytes(poolFs.pool);
    const snapshot = await timed(() =>
      retry(() => createSnapshot(clients, name(`snap-${round}`), sourceId, rpcTimeoutMs)),
    );
    const snapshotId = snapshot.value.snapshot?.snapshot_id ?? '';
    if (!snapshot.value.snapshot?.ready_to_use) throw new Error(`CreateSnapshot ${snapshotId}: not ready_to_use`);
    const copy = snapshotImage(poolFs.pool, snapshotId);
    await run('sync', ['-f', poolFs.pool]);
    const afterSnapshot = usedBytes(poolFs.pool);

    const contentSource = { volume_content_source: { snapshot: { snapshot_id: snapshotId } } };
    const restore = await timed(() =>
      retry(() => createVolume(clients, blockRequest(name(`restore-${round}`), contentSource), rpcTimeoutMs)),
    );
    const restoredId = restore.value.volume?.volume_id ?? '';
    const restored = volumeImage(poolFs.pool, restoredId);
    await run('sync', ['-f', poolFs.pool]);
    const afterRestore = usedBytes(poolFs.pool);
    assertSameSamples(sourceImage, copy);
    assertSameSamples(sourceImage, restored);
    const figures: Round = {
      snapshotMs: snapshot.ms,
      restoreMs: restore.ms,
      snapshotBlockBytes: blockBytes(copy),
      restoreBlockBytes: blockBytes(restored),
      snapshotSharedBytes: await sharedBytes(copy),
      snapshotFsBytes: afterSnapshot - beforeSnapshot,
      restoreFsBytes: afterRestore - afterSnapshot,
    };
    result.rounds.push(figures);
    progress(
      `${poolFs.kind} round ${round}: snapshot ${figures.snapshotMs.toFixed(0)} ms, restore ` +
        `${figures.restoreMs.toFixed(0)} ms, pool filesystem +${(figures.snapshotFsBytes / MiB).toFixed(1)} / ` +
        `+${(figures.restoreFsBytes / MiB).toFixed(1)} MiB`,
    );

    await retry(() => deleteVolume(clients, restoredId, rpcTimeoutMs));
    await retry(() => deleteSnapshot(clients, snapshotId, rpcTimeoutMs));
    for (const gone of [copy, restored])
      if (fs.existsSync(gone)) throw new Error(`${gone} is still there after the delete`);
  }
  await retry(() => deleteVolume(clients, sourceId, rpcTimeoutMs));
  return result;
}
