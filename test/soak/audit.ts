import type { Client } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { loopMountsUnder, type Cluster } from './cluster';
import type { Model } from './model';
import {
  NODE_RECORD_WORKFLOW_TYPES,
  parseGroupSnapshotId,
  parseSnapshotId,
  parseVolumeId,
  poolIdPrefix,
} from '../../common/names';
import { isFrozen } from '../unit/storage/mount-helpers';

/** One volume found on disk: a directory under volumes/, a record under records/, or both. */
export interface DiskVolume {
  node: string;
  key: string;
  hasDir: boolean;
  hasRecord: boolean;
  /** From the record: the CSI name it was created for. */
  name?: string;
}

/** One snapshot found on disk: a copy under snapshots/data/, a record under snapshots/records/, or both. */
export interface DiskSnapshot {
  node: string;
  key: string;
  hasData: boolean;
  hasRecord: boolean;
  /** From the record: the CSI snapshot name (a group member's: `<group name>/<volume key>`). */
  name?: string;
  /** From the record: the key of the group snapshot it is a member of. */
  groupKey?: string;
}

export interface PoolSummary {
  node: string;
  poolId?: string;
  volumes: number;
  records: number;
  /** Snapshot copies (snapshots/data/) and snapshot records (snapshots/records/). */
  snapshots: number;
  snapshotRecords: number;
  /** Intents left in journal/ and snapshots/journal/ after the agents stopped: operations cut short, not settled. */
  intents: string[];
}

/**
 * The snapshot half of the audit: every pool's snapshots/ against the snapshots the orchestrator holds, group
 * snapshot members included (each member is a snapshot copy of its pool; a leaked one's reason names its group).
 */
export interface SnapshotAudit {
  known: number;
  onDisk: number;
  /** Group snapshots the orchestrator holds, their members, and member copies on disk (records with a groupKey). */
  groups: { known: number; members: number; membersOnDisk: number };
  leaked: (DiskSnapshot & { reason: string })[];
  lost: { name: string; snapshotId: string; reason: string }[];
  duplicated: { name: string; snapshots: string[] }[];
  /** A copy without a record, or a record without a copy. */
  torn: DiskSnapshot[];
}

export interface AuditResult {
  known: number;
  onDisk: number;
  pools: PoolSummary[];
  leaked: (DiskVolume & { reason: string })[];
  lost: { name: string; volumeId: string; reason: string }[];
  duplicated: { name: string; volumes: string[] }[];
  /** A directory without a record, or a record without a directory. */
  torn: DiskVolume[];
  pending: { workflowId: string; type: string; startTime: string }[];
  /**
   * DeleteVolume answered OK although the volume's node had no process during the whole call, and was not
   * forgotten by an operator meanwhile (then the volume is written off; the leak check sees it if it stays).
   */
  deletesAckedWhileNodeDown: { op: number; volumeId: string; node: string }[];
  /** Volume and snapshot IDs answered whose pool prefix is the pool of another node than the ID names. */
  misaddressed: { op: number; name: string; volumeId: string; poolOf: string }[];
  /** Restores (CreateVolume from a snapshot) answered with a volume on another node than the snapshot's. */
  restoresElsewhere: { op: number; name: string; volumeId: string; snapshotId: string }[];
  /**
   * A filesystem a copy froze and nothing thawed: a freeze record left in a pool (frozen/: the agent that froze it
   * never thawed it), or a loop filesystem mounted under the work folder that is still frozen.
   */
  frozen: string[];
  snapshots: SnapshotAudit;
}

function listDir(dir: string): string[] {
  return fs.existsSync(dir) ? fs.readdirSync(dir) : [];
}

/** Reads a pool's directories straight from disk (storage/pool/pool-layout.ts), trusting no driver answer. */
function readPool(
  node: string,
  root: string,
): { summary: PoolSummary; volumes: DiskVolume[]; snapshots: DiskSnapshot[] } {
  let poolId: string | undefined;
  try {
    poolId = (JSON.parse(fs.readFileSync(path.join(root, 'pool.json'), 'utf8')) as { poolId?: string }).poolId;
  } catch {
    poolId = undefined;
  }
  const dirs = listDir(path.join(root, 'volumes')).filter((name) => !name.startsWith('.'));
  const recordFiles = listDir(path.join(root, 'records')).filter((name) => name.endsWith('.json'));
  const byKey = new Map<string, DiskVolume>();
  const entry = (key: string) => {
    const found = byKey.get(key) ?? { node, key, hasDir: false, hasRecord: false };
    byKey.set(key, found);
    return found;
  };
  for (const key of dirs) entry(key).hasDir = true;
  for (const file of recordFiles) {
    const volume = entry(file.slice(0, -'.json'.length));
    volume.hasRecord = true;
    try {
      volume.name = (JSON.parse(fs.readFileSync(path.join(root, 'records', file), 'utf8')) as { name?: string }).name;
    } catch {
      volume.name = undefined;
    }
  }
  const copies = listDir(path.join(root, 'snapshots', 'data')).filter((name) => !name.startsWith('.'));
  const snapshotFiles = listDir(path.join(root, 'snapshots', 'records')).filter((name) => name.endsWith('.json'));
  const snapshots = new Map<string, DiskSnapshot>();
  const snapshot = (key: string) => {
    const found = snapshots.get(key) ?? { node, key, hasData: false, hasRecord: false };
    snapshots.set(key, found);
    return found;
  };
  for (const key of copies) snapshot(key).hasData = true;
  for (const file of snapshotFiles) {
    const found = snapshot(file.slice(0, -'.json'.length));
    found.hasRecord = true;
    try {
      const record = JSON.parse(fs.readFileSync(path.join(root, 'snapshots', 'records', file), 'utf8'));
      found.name = (record as { name?: string }).name;
      found.groupKey = (record as { groupKey?: string }).groupKey;
    } catch {
      found.name = undefined;
    }
  }
  const intents = [
    ...listDir(path.join(root, 'journal')),
    ...listDir(path.join(root, 'snapshots', 'journal')).map((file) => `snapshots/${file}`),
  ];
  return {
    summary: {
      node,
      poolId,
      volumes: dirs.length,
      records: recordFiles.length,
      snapshots: copies.length,
      snapshotRecords: snapshotFiles.length,
      intents,
    },
    volumes: [...byKey.values()],
    snapshots: [...snapshots.values()],
  };
}

async function runningWorkflows(client: Client, driverName: string): Promise<AuditResult['pending']> {
  const pending: AuditResult['pending'] = [];
  for await (const workflow of client.workflow.list({ query: 'ExecutionStatus = "Running"' })) {
    if (workflow.workflowId.startsWith(`${driverName}/`) && !NODE_RECORD_WORKFLOW_TYPES.includes(workflow.type)) {
      pending.push({
        workflowId: workflow.workflowId,
        type: workflow.type,
        startTime: workflow.startTime.toISOString(),
      });
    }
  }
  return pending;
}

/** Whether a snapshot's copy is on its node's disk now: the harness's probe for Model.copyOnDisk. */
export function snapshotCopyProbe(cluster: Cluster): (snapshotId: string) => boolean | undefined {
  return (snapshotId) => {
    const parts = parseSnapshotId(snapshotId);
    if (!parts || !cluster.nodes.some((node) => node.name === parts.nodeId)) return undefined;
    return fs.existsSync(path.join(cluster.pool(parts.nodeId), 'snapshots', 'data', parts.key));
  };
}

/** Waits (bounded) for visibility to show no running workflow of this driver besides the node records. */
export async function pendingWorkflows(client: Client, driverName: string, timeoutMs: number) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const pending = await runningWorkflows(client, driverName);
    if (pending.length === 0 || Date.now() > until) return pending;
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

/** Compares every pool on disk with what the orchestrator was told exists. Run with every agent stopped. */
export function auditPools(cluster: Cluster, model: Model, pending: AuditResult['pending']): AuditResult {
  const pools = cluster.nodes.map((node) => ({ node: node.name, ...readPool(node.name, cluster.pool(node.name)) }));
  const disk = pools.flatMap((pool) => pool.volumes);
  const known = model.known();
  const knownKeys = new Set<string>();
  const lost: AuditResult['lost'] = [];
  for (const [name, volumeId] of known) {
    const parts = parseVolumeId(volumeId);
    if (!parts) {
      lost.push({ name, volumeId, reason: 'the volume ID does not parse' });
      continue;
    }
    knownKeys.add(`${parts.nodeId}/${parts.key}`);
    const pool = pools.find((candidate) => candidate.node === parts.nodeId);
    const found = pool?.volumes.find((volume) => volume.key === parts.key);
    if (!pool || !found) lost.push({ name, volumeId, reason: `no volume ${parts.key} in the pool of ${parts.nodeId}` });
    else if (!pool.summary.poolId || poolIdPrefix(pool.summary.poolId) !== parts.poolIdPrefix)
      lost.push({ name, volumeId, reason: `the pool of ${parts.nodeId} is ${pool.summary.poolId ?? 'unreadable'}` });
    else if (found.name !== name) lost.push({ name, volumeId, reason: `its record names "${found.name ?? '?'}"` });
  }
  const leaked = disk
    .filter((volume) => !knownKeys.has(`${volume.node}/${volume.key}`))
    .map((volume) => ({ ...volume, reason: leakHistory(model, volume) }));
  const poolIds = pools.flatMap((pool) =>
    pool.summary.poolId ? [{ node: pool.node, poolId: pool.summary.poolId }] : [],
  );
  const misaddressed = model.ops.flatMap((op) => {
    const { id, parts } = madeOrDeleted(op, ['create', 'snapshot', 'group']);
    const owner = poolIds.find((pool) => parts && poolIdPrefix(pool.poolId) === parts.poolIdPrefix)?.node;
    return parts && owner && owner !== parts.nodeId
      ? [{ op: op.id, name: op.name, volumeId: id as string, poolOf: owner }]
      : [];
  });
  const restoresElsewhere = model.ops.flatMap((op) => {
    if (op.kind !== 'create' || !op.fromSnapshot || !op.volumeId) return [];
    const node = parseVolumeId(op.volumeId)?.nodeId;
    return node !== undefined && node === parseSnapshotId(op.fromSnapshot)?.nodeId
      ? []
      : [{ op: op.id, name: op.name, volumeId: op.volumeId, snapshotId: op.fromSnapshot }];
  });
  const byName = new Map<string, string[]>();
  for (const volume of disk) {
    if (volume.name) byName.set(volume.name, [...(byName.get(volume.name) ?? []), `${volume.node}/${volume.key}`]);
  }
  const duplicated = [...byName.entries()]
    .filter(([, volumes]) => volumes.length > 1)
    .map(([name, volumes]) => ({ name, volumes }));

  // DeleteVolume and DeleteSnapshot alike: OK only once the node's pool confirmed (or the node was forgotten).
  const deletesAckedWhileNodeDown = model.ops
    .filter((op) => op.outcome === 'ok' && op.endedAt !== undefined)
    .flatMap((op) => {
      const { id, parts } = madeOrDeleted(op, ['delete', 'snapshot-delete', 'group-delete']);
      if (!id) return [];
      const node = parts?.nodeId;
      const process = node ? cluster.nodes.find((candidate) => candidate.name === node) : undefined;
      const forgotten = model.forgotten.some(
        (window) =>
          window.node === node && window.from <= (op.endedAt as number) && (window.to ?? Infinity) >= op.startedAt,
      );
      return !forgotten && process?.downThroughout(op.startedAt, op.endedAt as number)
        ? [{ op: op.id, volumeId: id, node: node as string }]
        : [];
    });

  return {
    known: known.size,
    onDisk: disk.length,
    pools: pools.map((pool) => pool.summary),
    leaked,
    lost,
    duplicated,
    torn: disk.filter((volume) => !volume.hasDir || !volume.hasRecord),
    pending,
    deletesAckedWhileNodeDown,
    misaddressed,
    restoresElsewhere,
    frozen: frozenLeft(cluster),
    snapshots: auditSnapshots(pools, model),
  };
}

/** Freeze records left in the pools, and loop filesystems under the work folder still frozen (AuditResult.frozen). */
function frozenLeft(cluster: Cluster): string[] {
  const records = cluster.nodes.flatMap((node) =>
    listDir(path.join(cluster.pool(node.name), 'frozen'))
      .filter((file) => file.endsWith('.json'))
      .map((file) => `${node.name}: freeze record frozen/${file} left`),
  );
  const mounts = loopMountsUnder(cluster.config.root)
    .filter((mountPoint) => isFrozen(mountPoint))
    .map((mountPoint) => `${mountPoint} is frozen`);
  return [...records, ...mounts];
}

/**
 * Every snapshot the orchestrator holds must be on its node's pool (copy and record, the pool the ID names, the
 * record naming it), and every snapshot on disk must be one it holds: a copy of a snapshot deleted (or written off
 * by a forget) or never answered ready is a leak. What the model saw on the way counts too, each once: a held
 * snapshot whose copy a deletion removed (lost), a deletion answered OK with the copy on disk (leaked).
 */
function auditSnapshots(
  pools: { node: string; summary: PoolSummary; snapshots: DiskSnapshot[] }[],
  model: Model,
): SnapshotAudit {
  // A group's members are held as any snapshot is, under the name their node records (`<group>/<volume key>`).
  const members = model.knownGroupMembers();
  const known = new Map([...model.knownSnapshots(), ...members]);
  const knownKeys = new Set<string>();
  const lost: SnapshotAudit['lost'] = [];
  for (const [name, snapshotId] of known) {
    const parts = parseSnapshotId(snapshotId);
    if (!parts) {
      lost.push({ name, snapshotId, reason: 'the snapshot ID does not parse' });
      continue;
    }
    knownKeys.add(`${parts.nodeId}/${parts.key}`);
    const pool = pools.find((candidate) => candidate.node === parts.nodeId);
    const found = pool?.snapshots.find((snapshot) => snapshot.key === parts.key);
    if (!pool || !found?.hasData)
      lost.push({ name, snapshotId, reason: `no copy ${parts.key} in the pool of ${parts.nodeId}` });
    else if (!pool.summary.poolId || poolIdPrefix(pool.summary.poolId) !== parts.poolIdPrefix)
      lost.push({ name, snapshotId, reason: `the pool of ${parts.nodeId} is ${pool.summary.poolId ?? 'unreadable'}` });
    else if (found.name !== name) lost.push({ name, snapshotId, reason: `its record names "${found.name ?? '?'}"` });
  }
  // Lost on the way, though the CO may have deleted it since (then the end's disk shows nothing).
  for (const entry of model.lostSnapshots) {
    if (!lost.some((other) => other.name === entry.name && other.snapshotId === entry.snapshotId))
      lost.push({ name: entry.name, snapshotId: entry.snapshotId, reason: entry.reason });
  }
  const disk = pools.flatMap((pool) => pool.snapshots);
  const leaked: SnapshotAudit['leaked'] = disk
    .filter((snapshot) => !knownKeys.has(`${snapshot.node}/${snapshot.key}`))
    .map((snapshot) => ({ ...snapshot, reason: snapshotHistory(model, snapshot) }));
  // Leaked when the deletion answered, though a later answer may have handed the same ID out again since.
  for (const entry of model.falseSnapshotDeletes) {
    const parts = parseSnapshotId(entry.snapshotId);
    if (!parts || leaked.some((copy) => copy.node === parts.nodeId && copy.key === parts.key)) continue;
    const reason = `DeleteSnapshot op ${entry.op} answered OK with the copy on disk; ${snapshotHistory(model, { node: parts.nodeId, key: parts.key, hasData: true, hasRecord: true, name: entry.name })}`;
    leaked.push({ node: parts.nodeId, key: parts.key, hasData: true, hasRecord: true, name: entry.name, reason });
  }
  // The same for a group's deletion: each member copy on disk when it answered OK is leaked.
  for (const entry of model.falseGroupDeletes) {
    for (const snapshotId of entry.snapshotIds) {
      const parts = parseSnapshotId(snapshotId);
      if (!parts || leaked.some((copy) => copy.node === parts.nodeId && copy.key === parts.key)) continue;
      const groupKey = parseGroupSnapshotId(entry.groupSnapshotId)?.key;
      const copy = {
        node: parts.nodeId,
        key: parts.key,
        hasData: true,
        hasRecord: true,
        name: `${entry.name}/?`,
        groupKey,
      };
      const reason =
        `DeleteVolumeGroupSnapshot op ${entry.op} of ${entry.groupSnapshotId} answered OK with member ` +
        `${snapshotId} on disk; ${snapshotHistory(model, copy)}`;
      leaked.push({ ...copy, reason });
    }
  }
  const byName = new Map<string, string[]>();
  for (const snapshot of disk) {
    if (snapshot.name)
      byName.set(snapshot.name, [...(byName.get(snapshot.name) ?? []), `${snapshot.node}/${snapshot.key}`]);
  }
  return {
    known: known.size,
    onDisk: disk.length,
    groups: {
      known: new Set([...members.keys()].map((name) => name.split('/')[0])).size,
      members: members.size,
      membersOnDisk: disk.filter((snapshot) => snapshot.groupKey !== undefined).length,
    },
    leaked,
    lost,
    duplicated: [...byName.entries()]
      .filter(([, snapshots]) => snapshots.length > 1)
      .map(([name, snapshots]) => ({ name, snapshots })),
    torn: disk.filter((snapshot) => !snapshot.hasData || !snapshot.hasRecord),
  };
}

/** What the orchestrator was told about a leaked snapshot: the ops of its name, or that none answered it. */
function snapshotHistory(model: Model, snapshot: DiskSnapshot): string {
  const ofKey = (id: string) => id.endsWith(`_${snapshot.key}`);
  const ops = model.ops.filter(
    (op) =>
      ((op.kind === 'snapshot' || op.kind === 'snapshot-delete') &&
        op.snapshotId !== undefined &&
        ofKey(op.snapshotId)) ||
      ((op.kind === 'group' || op.kind === 'group-delete') && (op.memberIds ?? []).some(ofKey)),
  );
  // A member's record names `<group name>/<volume key>`: the group's ops, by the group's name.
  const group = snapshot.groupKey !== undefined ? snapshot.name?.split('/')[0] : undefined;
  const byName = model.ops.filter(
    (op) => (op.kind === 'snapshot' && op.name === snapshot.name) || (op.kind === 'group' && op.name === group),
  );
  const shown = ops.length > 0 ? ops : byName;
  const member = snapshot.groupKey !== undefined ? `member of group snapshot key ${snapshot.groupKey}; ` : '';
  if (shown.length === 0) return `${member}never asked for by the orchestrator (record name "${snapshot.name ?? '?'}")`;
  return (
    member +
    shown
      .map(
        (op) =>
          `op ${op.id} ${op.kind} ${op.outcome ?? 'running'}${op.endedByForget ? ' (ended by a forget)' : ''} ` +
          `(${(op.kind.startsWith('group') ? op.groupSnapshotId : op.snapshotId) ?? 'no ID answered'})`,
      )
      .join('; ')
  );
}

/** What the orchestrator was told about a leaked volume: which create answered it, which delete "deleted" it. */
function leakHistory(model: Model, volume: DiskVolume): string {
  const ops = model.ops.filter(
    (op) => (op.kind === 'create' || op.kind === 'delete') && op.volumeId?.endsWith(`_${volume.key}`),
  );
  if (ops.length === 0) return `never answered to the orchestrator (record name "${volume.name ?? '?'}")`;
  return ops.map((op) => `op ${op.id} ${op.kind} ${op.outcome ?? 'running'} (${op.volumeId})`).join('; ');
}

type Op = Model['ops'][number];

/**
 * The ID an operation of one of `kinds` made or deleted (a volume's, a snapshot's or a group's), with its parts:
 * the node and pool it names.
 */
function madeOrDeleted(op: Op, kinds: readonly Op['kind'][]) {
  if (!kinds.includes(op.kind)) return { id: undefined, parts: undefined };
  if (op.kind === 'create' || op.kind === 'delete')
    return { id: op.volumeId, parts: op.volumeId ? parseVolumeId(op.volumeId) : undefined };
  if (op.kind === 'group' || op.kind === 'group-delete')
    return { id: op.groupSnapshotId, parts: op.groupSnapshotId ? parseGroupSnapshotId(op.groupSnapshotId) : undefined };
  if (op.kind === 'snapshot' || op.kind === 'snapshot-delete')
    return { id: op.snapshotId, parts: op.snapshotId ? parseSnapshotId(op.snapshotId) : undefined };
  return { id: undefined, parts: undefined };
}
