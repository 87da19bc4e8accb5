import type { Client } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { parseVolumeId, poolIdPrefix } from '../../common/volume-id';
import type { Cluster } from './cluster';
import type { Model } from './model';
import { NODE_RECORD_WORKFLOW_TYPES } from '../../common/names';

/** One volume found on disk: a directory under volumes/, a record under records/, or both. */
export interface DiskVolume {
  node: string;
  key: string;
  hasDir: boolean;
  hasRecord: boolean;
  /** From the record: the CSI name it was created for. */
  name?: string;
}

export interface PoolSummary {
  node: string;
  poolId?: string;
  volumes: number;
  records: number;
  /** Intents left in journal/ after the agents stopped: an operation cut short and not yet settled. */
  intents: string[];
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
  /** Volume IDs answered by CreateVolume whose pool prefix is the pool of another node than the ID names. */
  misaddressed: { op: number; name: string; volumeId: string; poolOf: string }[];
}

function listDir(dir: string): string[] {
  return fs.existsSync(dir) ? fs.readdirSync(dir) : [];
}

/** Reads a pool's directories straight from disk (storage/pool/pool-layout.ts), trusting no driver answer. */
function readPool(node: string, root: string): { summary: PoolSummary; volumes: DiskVolume[] } {
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
  const intents = listDir(path.join(root, 'journal'));
  return {
    summary: { node, poolId, volumes: dirs.length, records: recordFiles.length, intents },
    volumes: [...byKey.values()],
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
    const parts = op.kind === 'create' && op.volumeId ? parseVolumeId(op.volumeId) : undefined;
    const owner = poolIds.find((pool) => parts && poolIdPrefix(pool.poolId) === parts.poolIdPrefix)?.node;
    return parts && owner && owner !== parts.nodeId
      ? [{ op: op.id, name: op.name, volumeId: op.volumeId as string, poolOf: owner }]
      : [];
  });
  const byName = new Map<string, string[]>();
  for (const volume of disk) {
    if (volume.name) byName.set(volume.name, [...(byName.get(volume.name) ?? []), `${volume.node}/${volume.key}`]);
  }
  const duplicated = [...byName.entries()]
    .filter(([, volumes]) => volumes.length > 1)
    .map(([name, volumes]) => ({ name, volumes }));

  const deletesAckedWhileNodeDown = model.ops
    .filter((op) => op.kind === 'delete' && op.outcome === 'ok' && op.volumeId && op.endedAt !== undefined)
    .flatMap((op) => {
      const node = parseVolumeId(op.volumeId as string)?.nodeId;
      const process = node ? cluster.nodes.find((candidate) => candidate.name === node) : undefined;
      const forgotten = model.forgotten.some(
        (window) =>
          window.node === node && window.from <= (op.endedAt as number) && (window.to ?? Infinity) >= op.startedAt,
      );
      return !forgotten && process?.downThroughout(op.startedAt, op.endedAt as number)
        ? [{ op: op.id, volumeId: op.volumeId as string, node: node as string }]
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
  };
}

/** What the orchestrator was told about a leaked volume: which create answered it, which delete "deleted" it. */
function leakHistory(model: Model, volume: DiskVolume): string {
  const ops = model.ops.filter((op) => op.volumeId?.endsWith(`_${volume.key}`));
  if (ops.length === 0) return `never answered to the orchestrator (record name "${volume.name ?? '?'}")`;
  return ops.map((op) => `op ${op.id} ${op.kind} ${op.outcome ?? 'running'} (${op.volumeId})`).join('; ');
}
