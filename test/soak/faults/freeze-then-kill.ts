import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseSnapshotId, parseVolumeId } from '../../../common/names';
import { connectCsi } from '../../../csi/client';
import { nodeRpcs } from '../../integration/node-helpers';
import { CopyGate, isAlive } from '../../support/copy-gate';
import { isFrozen } from '../../unit/storage/mount-helpers';
import type { DriverProcess } from '../cluster';
import type { NameState, OpRecord } from '../model';
import { isRoot } from '../options';
import type { Fault, FaultContext } from './types';
import { awaitOps, step } from './types';

/** A write through the staging path must end within this long once the agent is back: thawed, not frozen. */
const THAWED_WRITE_MS = 10_000;
/** The retried snapshot waits for the dead attempt's 10 s heartbeat timeout, then copies again. */
const SNAPSHOT_AFTER_RESTART_MS = 120_000;
/** The file written before the snapshot, read back from its restore. */
const DATA_FILE = 'written-before-the-freeze';

/**
 * A node agent SIGKILLed while a snapshot's copy holds a staged loop volume's filesystem frozen (a DaemonSet
 * rollout's SIGKILL after the grace period, the OOM killer), on a node with the loop backend (options.ts,
 * nodeBackends). A volume of that node is staged (a real mount through the agent's socket) and written to; the agent
 * is restarted with a copy gate on its PATH (test/support/copy-gate.ts) that holds the copy of that volume's image
 * only; a CreateSnapshot of the volume goes through the controllers, and once the copy waits at the gate, with the
 * filesystem frozen, the agent and its cp are SIGKILLed. Then the agent starts again, and:
 * - the filesystem is thawed: a write through the staging path ends within seconds (a process writing to a frozen
 *   filesystem waits until the thaw);
 * - the snapshot completes, by the retried activity, with one copy (the gate saw two copies: the killed one and the
 *   retry) and one record of its name, nothing left in the snapshot journal or in frozen/;
 * - a restore of it holds the data written before the freeze;
 * the audit then sees whatever leaked or tore, and any freeze record or frozen mount left (audit.ts).
 */
export const freezeThenKill: Fault = {
  kind: 'freeze-then-kill',
  plannedOps: () => 3,
  async run(context, record) {
    const { cluster, workload, prng } = context;
    if (!isRoot()) throw new Error('freeze-then-kill needs root: loop devices, mounts and fsfreeze');
    const loopNodes = cluster.nodes.filter((node) => cluster.backendOf(node.name) === 'loop');
    if (loopNodes.length === 0) throw new Error('no node agent runs the loop backend (options.ts, nodeBackends)');
    const node = prng.pick(loopNodes);
    await workload.ensureOn(node.name, 1, record.kind, 30_000);
    const candidates = workload.model.idleVolumes(node.name);
    if (candidates.length === 0) throw new Error(`no idle volume on ${node.name} to stage`);
    const volume = prng.pick(candidates);
    volume.busy = true;
    const volumeId = volume.volumeId as string;
    const key = parseVolumeId(volumeId)?.key as string;
    const gate = new CopyGate(
      path.join(cluster.config.root, 'gates', `freeze-then-kill-${record.round}`),
      `/volumes/${key}/disk.img`,
    );
    const problems: string[] = [];
    const staged: { volumeId: string; staging: string; state: NameState }[] = [];
    let snapshotOp: OpRecord | undefined;
    try {
      step(context, record, `restart ${node.name} with a gate on the copy of ${volumeId}; stage it, write to it`);
      await node.start(context.builds.current, { env: gate.env() });
      const staging = await stage(context, node, volume);
      staged.push({ volumeId, staging, state: volume });
      const data = randomBytes(1024 * 1024);
      fs.writeFileSync(path.join(staging, DATA_FILE), data);

      snapshotOp = workload.snapshotOne(record.kind, { source: volume, hold: true }) as OpRecord;
      record.issuedOps.push(snapshotOp.id);
      const [copy] = await gate.untilStarted(1, 60_000);
      const frozenDuringCopy = isFrozen(staging);
      step(context, record, `snapshot ${snapshotOp.name} copies (frozen: ${frozenDuringCopy}); SIGKILL ${node.name}`);
      await node.kill('SIGKILL');
      if (copy !== undefined && isAlive(copy)) process.kill(copy, 'SIGKILL'); // a Pod's kill takes every process
      const frozenAfterKill = isFrozen(staging);
      if (!frozenAfterKill)
        problems.push(`${volumeId} was not frozen when ${node.name} was killed mid-copy: the fault tested no thaw`);

      gate.open();
      await node.start(context.builds.current, { env: gate.env() });
      const restartedAt = Date.now();
      const write = await timedWrite(path.join(staging, 'written-after-the-restart'), THAWED_WRITE_MS);
      step(
        context,
        record,
        `${node.name} is back; a write through the staging path took ${write.ms ?? `over ${THAWED_WRITE_MS}`} ms`,
      );
      if (write.ms === undefined) {
        problems.push(
          `${volumeId} stayed frozen after ${node.name} restarted: a write through ${staging} did not end within ` +
            `${THAWED_WRITE_MS / 1000} s`,
        );
        // Thawed by hand, so that the rest of the run (and this write) can go on.
        spawnSync('fsfreeze', ['--unfreeze', staging]);
        await write.exited;
      }

      const left = await awaitOps(context, [snapshotOp.id], SNAPSHOT_AFTER_RESTART_MS);
      const snapshotMs = Date.now() - restartedAt;
      const snapshotId = snapshotOp.outcome === 'ok' ? snapshotOp.snapshotId : undefined;
      step(context, record, `snapshot ${snapshotOp.name}: ${snapshotId ?? 'not answered'} ${snapshotMs} ms after`);
      if (left > 0)
        problems.push(`snapshot ${snapshotOp.name} not answered within ${SNAPSHOT_AFTER_RESTART_MS / 1000} s`);
      else if (!snapshotId) problems.push(`snapshot ${snapshotOp.name} ended ${snapshotOp.outcome ?? '?'}`);
      const copies = gate.started().length;
      if (snapshotId && copies !== 2)
        problems.push(`${copies} copies of ${volumeId} ran (the killed one and one retry expected)`);
      const pool = cluster.pool(node.name);
      const onDisk = snapshotId ? snapshotOnDisk(pool, snapshotOp.name, snapshotId) : [];
      problems.push(...onDisk);
      if (fs.existsSync(path.join(pool, 'frozen', `${key}.json`)))
        problems.push(`the freeze record frozen/${key}.json is still in ${node.name}'s pool`);
      if (isFrozen(staging)) problems.push(`${volumeId} is frozen after its snapshot completed`);

      const snapshot = workload.model.snapshotState(snapshotOp.name);
      let dataMatches: boolean | undefined;
      if (snapshotId) {
        step(context, record, `unstage ${volumeId}; restore ${snapshotId} and read it`);
        await unstage(context, node, staged.splice(0, 1));
        const restore = workload.restoreOne(record.kind, { snapshot, hold: true }) as OpRecord;
        record.issuedOps.push(restore.id);
        await awaitOps(context, [restore.id], 90_000);
        if (restore.outcome !== 'ok' || !restore.volumeId) {
          problems.push(`the restore of ${snapshotId} (op ${restore.id}) ended ${restore.outcome ?? 'unanswered'}`);
          void workload.done(restore).then(() => (workload.model.state(restore.name).busy = false));
        } else {
          const restored = workload.model.state(restore.name);
          const restoredStaging = await stage(context, node, restored);
          staged.push({ volumeId: restore.volumeId, staging: restoredStaging, state: restored });
          const file = path.join(restoredStaging, DATA_FILE);
          dataMatches = fs.existsSync(file) && fs.readFileSync(file).equals(data);
          if (!dataMatches) problems.push(`the restore of ${snapshotId} does not hold the data written before it`);
        }
      }
      record.details = {
        node: node.name,
        volumeId,
        snapshotOp: snapshotOp.id,
        snapshotId,
        frozenDuringCopy,
        frozenAfterKill,
        thawedWriteMs: write.ms,
        snapshotAfterRestartMs: snapshotMs,
        copies,
        dataMatches,
      };
    } finally {
      gate.open();
      for (const pid of gate.started()) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
      // Never leave a frozen filesystem behind, whatever failed: the run and its clean-up would wait on it.
      for (const { staging } of staged) spawnSync('fsfreeze', ['--unfreeze', staging]);
      await unstage(context, node, staged).catch((error: unknown) => problems.push(String(error)));
      volume.busy = false;
      if (snapshotOp) workload.model.snapshotState(snapshotOp.name).busy = false;
    }
    if (problems.length > 0) throw new Error(problems.join('; '));
  },
};

/** NodeStageVolume of a volume of this node at kubelet's staging path for it; returns the path. */
async function stage(context: FaultContext, node: DriverProcess, volume: NameState): Promise<string> {
  const volumeId = volume.volumeId as string;
  const staging = path.join(context.cluster.kubeletDir(), 'staging', parseVolumeId(volumeId)?.key ?? 'unknown');
  fs.mkdirSync(staging, { recursive: true });
  const clients = connectCsi(node.endpoint);
  try {
    await nodeRpcs(clients).stage(volumeId, staging);
  } finally {
    clients.close();
  }
  return staging;
}

/** NodeUnstageVolume of each, freeing the volume for the mix; throws the first failure after trying them all. */
async function unstage(
  context: FaultContext,
  node: DriverProcess,
  volumes: { volumeId: string; staging: string; state: NameState }[],
): Promise<void> {
  const failures: string[] = [];
  const clients = connectCsi(node.endpoint);
  try {
    for (const { volumeId, staging, state } of volumes) {
      try {
        await nodeRpcs(clients).unstage(volumeId, staging);
        state.busy = false;
      } catch (error) {
        failures.push(`unstage ${volumeId}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  } finally {
    clients.close();
  }
  volumes.splice(0);
  if (failures.length > 0) throw new Error(failures.join('; '));
}

/**
 * Writes a file by another process (a write to a frozen filesystem waits in the kernel until the thaw: this process
 * must not), and reports how long it took, or undefined past timeoutMs; `exited` resolves once the writer ends.
 */
async function timedWrite(file: string, timeoutMs: number): Promise<{ ms?: number; exited: Promise<void> }> {
  const started = Date.now();
  const child = spawn('sh', ['-c', 'echo thawed > "$1"', 'sh', file], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let timer: NodeJS.Timeout | undefined;
  const ended = await Promise.race([
    exited.then(() => true),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
  ]);
  clearTimeout(timer);
  return { ms: ended ? Date.now() - started : undefined, exited };
}

/** What the pool holds for a snapshot answered `snapshotId`: one copy and one record of its name, no intent left. */
function snapshotOnDisk(pool: string, name: string, snapshotId: string): string[] {
  const key = parseSnapshotId(snapshotId)?.key ?? 'unknown';
  const problems: string[] = [];
  const recordsDir = path.join(pool, 'snapshots', 'records');
  const ofName = fs
    .readdirSync(recordsDir)
    .filter((file) => file.endsWith('.json'))
    .filter(
      (file) => (JSON.parse(fs.readFileSync(path.join(recordsDir, file), 'utf8')) as { name?: string }).name === name,
    );
  if (ofName.length !== 1 || ofName[0] !== `${key}.json`)
    problems.push(`snapshot ${name} has records ${ofName.join(', ') || 'none'} (one, ${key}.json, expected)`);
  if (!fs.existsSync(path.join(pool, 'snapshots', 'data', key))) problems.push(`snapshot ${name} has no copy ${key}`);
  if (fs.existsSync(path.join(pool, 'snapshots', 'journal', `${key}.json`)))
    problems.push(`snapshot ${name} left its intent in the journal`);
  return problems;
}
