import fs from 'node:fs';
import path from 'node:path';
import type { AuditResult } from './audit';
import type { Cluster, UnexpectedExit } from './cluster';
import type { FaultRecord } from './faults/types';
import type { Anomaly, Model, OpRecord } from './model';

type ForgottenWindow = Model['forgotten'][number];
import { nodeBackends, type SoakOptions } from './options';
import type { UnexpectedAnswer } from './workload';

export interface FaultSummary {
  kind: string;
  round: number;
  startedAt: string;
  durationMs: number;
  steps: string[];
  details: Record<string, unknown>;
  error?: string;
  /** Operations in flight at some point of the fault's window. */
  hit: {
    total: number;
    creates: number;
    deletes: number;
    /** CreateSnapshot, DeleteSnapshot and restores (CreateVolume from a snapshot; also among creates). */
    snapshotOps: number;
    /** CreateVolumeGroupSnapshot, DeleteVolumeGroupSnapshot, GetVolumeGroupSnapshot. */
    groupOps: number;
    aimed: number;
    retried: Record<string, number>;
    ops: number[];
  };
}

export interface SnapshotCounts {
  /** CreateSnapshot operations issued, and answered ready (the CO holds a snapshot). */
  creates: number;
  created: number;
  /** CreateSnapshot ended NOT_FOUND because the source's node was forgotten: no snapshot, the copy written off. */
  endedByForget: number;
  /**
   * CreateSnapshot of a name used before (after its snapshot was deleted, or while its deletion was in flight),
   * issued, and answered ready.
   */
  recreates: number;
  recreated: number;
  /** Restores (CreateVolume from a snapshot) issued, and answered with a volume. */
  restores: number;
  restored: number;
  /** DeleteSnapshot operations issued, answered OK, and of those answered while the node was forgotten. */
  deletes: number;
  deleted: number;
  writtenOff: number;
}

/** The GroupController's operations (docs/soak.md); restores from a member count among the snapshot restores. */
export interface GroupCounts {
  /** CreateVolumeGroupSnapshot issued, answered OK (every member ready), and ended NOT_FOUND by a forget. */
  creates: number;
  created: number;
  endedByForget: number;
  /** Of those, of a name whose group was deleted (the same volumes again), issued and answered. */
  recreates: number;
  recreated: number;
  /** Member copies the answers held. */
  members: number;
  /** DeleteVolumeGroupSnapshot issued, answered OK, and of those answered while the node was forgotten. */
  deletes: number;
  deleted: number;
  writtenOff: number;
  /** GetVolumeGroupSnapshot issued, answered with the members, answered NOT_FOUND. */
  gets: number;
  got: number;
  notFound: number;
  /** Restores (CreateVolume) from a member, issued and answered with a volume. */
  restores: number;
  restored: number;
}

export interface SoakReport {
  ok: boolean;
  problems: string[];
  command: string;
  replay: string;
  options: SoakOptions;
  startedAt: string;
  durationMs: number;
  workDir: string;
  driverName: string;
  baseline?: { rev?: string; sha?: string; typeErrors?: boolean; adaptations: string[] };
  workload: {
    issued: number;
    creates: number;
    recreates: number;
    deletes: number;
    snapshots: SnapshotCounts;
    groups: GroupCounts;
    ok: number;
    failed: number;
    unsettled: number;
    attempts: number;
    retried: Record<string, number>;
    unexpected: UnexpectedAnswer[];
    anomalies: Anomaly[];
  };
  faults: FaultSummary[];
  audit?: AuditResult;
  driverIssues: { unexpectedExits: UnexpectedExit[]; logFindings: { process: string; lines: string[] }[] };
  ops: OpRecord[];
}

function addCodes(into: Record<string, number>, codes: Record<string, number>): void {
  for (const [code, count] of Object.entries(codes)) into[code] = (into[code] ?? 0) + count;
}

export function summarizeFault(record: FaultRecord, ops: OpRecord[]): FaultSummary {
  const end = record.endedAt ?? Date.now();
  const hit = ops.filter((op) => op.startedAt <= end && (op.endedAt ?? Infinity) >= record.startedAt);
  const retried: Record<string, number> = {};
  for (const op of hit) addCodes(retried, op.codes);
  return {
    kind: record.kind,
    round: record.round,
    startedAt: new Date(record.startedAt).toISOString(),
    durationMs: end - record.startedAt,
    steps: record.steps.map((step) => `${step.at.slice(11, 19)} ${step.what}`),
    details: record.details,
    ...(record.error ? { error: record.error } : {}),
    hit: {
      total: hit.length,
      creates: hit.filter((op) => op.kind === 'create').length,
      deletes: hit.filter((op) => op.kind === 'delete').length,
      snapshotOps: hit.filter((op) => op.kind.startsWith('snapshot') || op.fromSnapshot !== undefined).length,
      groupOps: hit.filter((op) => op.kind.startsWith('group')).length,
      aimed: record.issuedOps.length,
      retried,
      ops: hit.map((op) => op.id),
    },
  };
}

function snapshotCounts(ops: OpRecord[], forgotten: ForgottenWindow[]): SnapshotCounts {
  const creates = ops.filter((op) => op.kind === 'snapshot');
  const restores = ops.filter((op) => op.kind === 'create' && op.fromSnapshot !== undefined);
  const deletes = ops.filter((op) => op.kind === 'snapshot-delete');
  const ok = (op: OpRecord) => op.outcome === 'ok';
  const whileForgotten = (op: OpRecord) =>
    forgotten.some(
      (window) =>
        window.node === op.node && window.from <= (op.endedAt ?? 0) && (window.to ?? Infinity) >= op.startedAt,
    );
  return {
    creates: creates.length,
    created: creates.filter((op) => ok(op) && op.snapshotId !== undefined).length,
    endedByForget: creates.filter((op) => op.endedByForget).length,
    recreates: creates.filter((op) => op.recreate).length,
    recreated: creates.filter((op) => op.recreate && ok(op) && op.snapshotId !== undefined).length,
    restores: restores.length,
    restored: restores.filter((op) => ok(op) && op.volumeId !== undefined).length,
    deletes: deletes.length,
    deleted: deletes.filter(ok).length,
    writtenOff: deletes.filter((op) => ok(op) && whileForgotten(op)).length,
  };
}

function groupCounts(ops: OpRecord[], forgotten: ForgottenWindow[]): GroupCounts {
  const of = (kind: OpRecord['kind']) => ops.filter((op) => op.kind === kind);
  const ok = (op: OpRecord) => op.outcome === 'ok';
  const creates = of('group');
  const created = creates.filter((op) => ok(op) && op.groupSnapshotId !== undefined);
  const deletes = of('group-delete');
  const gets = of('group-get');
  const members = new Set(created.flatMap((op) => op.memberIds ?? []));
  const restores = ops.filter(
    (op) => op.kind === 'create' && op.fromSnapshot !== undefined && members.has(op.fromSnapshot),
  );
  const whileForgotten = (op: OpRecord) =>
    forgotten.some(
      (window) =>
        window.node === op.node && window.from <= (op.endedAt ?? 0) && (window.to ?? Infinity) >= op.startedAt,
    );
  return {
    creates: creates.length,
    created: created.length,
    endedByForget: creates.filter((op) => op.endedByForget).length,
    recreates: creates.filter((op) => op.recreate).length,
    recreated: created.filter((op) => op.recreate).length,
    members: members.size,
    deletes: deletes.length,
    deleted: deletes.filter(ok).length,
    writtenOff: deletes.filter((op) => ok(op) && whileForgotten(op)).length,
    gets: gets.length,
    got: gets.filter((op) => ok(op) && !op.notFound).length,
    notFound: gets.filter((op) => ok(op) && op.notFound).length,
    restores: restores.length,
    restored: restores.filter((op) => ok(op) && op.volumeId !== undefined).length,
  };
}

export function summarizeWorkload(
  ops: OpRecord[],
  unexpected: UnexpectedAnswer[],
  anomalies: Anomaly[],
  forgotten: ForgottenWindow[] = [],
): SoakReport['workload'] {
  const retried: Record<string, number> = {};
  for (const op of ops) addCodes(retried, op.codes);
  const deletedNames = new Map<string, number>();
  let recreates = 0;
  for (const op of [...ops].sort((a, b) => a.startedAt - b.startedAt)) {
    if (op.kind === 'delete' && op.outcome === 'ok') deletedNames.set(op.name, op.endedAt ?? 0);
    if (op.kind === 'create' && (deletedNames.get(op.name) ?? Infinity) <= op.startedAt) recreates++;
  }
  return {
    issued: ops.length,
    creates: ops.filter((op) => op.kind === 'create').length,
    recreates,
    deletes: ops.filter((op) => op.kind === 'delete').length,
    snapshots: snapshotCounts(ops, forgotten),
    groups: groupCounts(ops, forgotten),
    ok: ops.filter((op) => op.outcome === 'ok').length,
    failed: ops.filter((op) => op.outcome === 'failed').length,
    unsettled: ops.filter((op) => op.outcome !== 'ok' && op.outcome !== 'failed').length,
    attempts: ops.reduce((sum, op) => sum + op.attempts, 0),
    retried,
    unexpected,
    anomalies,
  };
}

/** Lines of the driver logs that betray a bug even when nothing leaked: non-determinism, fatal errors. */
export function scanLogs(cluster: Cluster): { process: string; lines: string[] }[] {
  const pattern = /nondetermin|NonDeterministic|TMPRL1100|"level":60/i;
  return cluster.all().flatMap((process) => {
    if (!fs.existsSync(process.logFile)) return [];
    const lines = fs
      .readFileSync(process.logFile, 'utf8')
      .split('\n')
      .filter((line) => pattern.test(line));
    return lines.length > 0 ? [{ process: process.name, lines: lines.slice(0, 20).map((l) => l.slice(0, 600)) }] : [];
  });
}

export function problemsOf(report: SoakReport): string[] {
  const problems: string[] = [];
  const count = (what: string, items: readonly unknown[] | undefined) => {
    if (items && items.length > 0) problems.push(`${items.length} ${what}`);
  };
  const audit = report.audit;
  if (!audit) problems.push('no audit: the run stopped before it');
  count('leaked volumes (on disk, unknown to the orchestrator)', audit?.leaked);
  count('lost volumes (known to the orchestrator, not on disk)', audit?.lost);
  count('names with several volumes on disk', audit?.duplicated);
  count('torn volumes (directory or record missing)', audit?.torn);
  count('workflows still running at the end', audit?.pending);
  count('deletions acknowledged while their node was down', audit?.deletesAckedWhileNodeDown);
  count('volume or snapshot IDs naming another node than the one holding it', audit?.misaddressed);
  count("restores answered on another node than the snapshot's", audit?.restoresElsewhere);
  count('filesystems left frozen (or freeze records left in a pool)', audit?.frozen);
  const snapshots = audit?.snapshots;
  count(
    'leaked snapshots (a copy on disk the orchestrator does not hold)',
    snapshots?.leaked.filter((copy) => copy.groupKey === undefined),
  );
  count(
    'leaked group snapshot members (a member copy on disk of a group the orchestrator does not hold)',
    snapshots?.leaked.filter((copy) => copy.groupKey !== undefined),
  );
  count('lost snapshots (held by the orchestrator, no copy on disk)', snapshots?.lost);
  count('snapshot names with several copies on disk', snapshots?.duplicated);
  count('torn snapshots (copy or record missing)', snapshots?.torn);
  if (report.workload.failed > 0) problems.push(`${report.workload.failed} operations failed`);
  if (report.workload.unsettled > 0) problems.push(`${report.workload.unsettled} operations never finished`);
  count('unexpected answers (not OK, ABORTED, UNAVAILABLE or DEADLINE_EXCEEDED)', report.workload.unexpected);
  count('anomalies in answers', report.workload.anomalies);
  count('driver processes exited on their own', report.driverIssues.unexpectedExits);
  count('driver logs with non-determinism or fatal errors', report.driverIssues.logFindings);
  for (const fault of report.faults)
    if (fault.error) problems.push(`fault ${fault.kind} failed: ${fault.error.split('\n')[0]}`);
  return problems;
}

const list = <T>(items: readonly T[], show: (item: T) => string, limit = 10) =>
  items.length === 0
    ? ' none'
    : `\n${items
        .slice(0, limit)
        .map((item) => `      ${show(item)}`)
        .join('\n')}${items.length > limit ? `\n      ... ${items.length - limit} more (see the JSON report)` : ''}`;

const codes = (record: Record<string, number>) =>
  Object.entries(record)
    .map(([code, count]) => `${code} ${count}`)
    .join(', ') || 'none';

export function formatReport(report: SoakReport): string {
  const w = report.workload;
  const a = report.audit;
  const lines = [
    `durable-csi soak: ${report.ok ? 'PASS' : 'FAIL'} in ${Math.round(report.durationMs / 1000)} s`,
    `  command: ${report.command}`,
    `  replay:  ${report.replay}`,
    `  driver ${report.driverName}, ${report.options.nodes} nodes (${nodeBackends(report.options).join(', ')}), 2 controllers; work dir ${report.workDir}`,
  ];
  if (report.baseline) {
    const note = report.baseline.typeErrors ? ', built despite type errors' : '';
    lines.push(`  baseline: ${report.baseline.rev} (${report.baseline.sha?.slice(0, 12)}${note})`);
    for (const adaptation of report.baseline.adaptations) lines.push(`    adapted: ${adaptation}`);
  }
  lines.push(
    `  operations: ${w.issued} issued (${w.creates} creates of which ${w.recreates} re-creates, ${w.deletes} deletes), ` +
      `${w.ok} ok, ${w.failed} failed, ${w.unsettled} unsettled; ${w.attempts} calls`,
    `  snapshots: ${w.snapshots.creates} creates (${w.snapshots.created} created, ${w.snapshots.endedByForget} ended by a forget; ` +
      `${w.snapshots.recreates} re-creates of a deleted name, ${w.snapshots.recreated} answered), ` +
      `${w.snapshots.restores} restores (${w.snapshots.restored} restored), ${w.snapshots.deletes} deletes ` +
      `(${w.snapshots.deleted} deleted, ${w.snapshots.writtenOff} of them written off)` +
      (a ? `; at the end ${a.snapshots.known} held by the orchestrator, ${a.snapshots.onDisk} on disk` : ''),
    `  group snapshots: ${w.groups.creates} creates (${w.groups.created} created with ${w.groups.members} members, ` +
      `${w.groups.endedByForget} ended by a forget; ${w.groups.recreates} re-creates of a deleted name, ` +
      `${w.groups.recreated} answered), ${w.groups.deletes} deletes (${w.groups.deleted} deleted, ` +
      `${w.groups.writtenOff} of them written off), ${w.groups.gets} gets (${w.groups.got} found, ` +
      `${w.groups.notFound} NOT_FOUND), ${w.groups.restores} restores from a member (${w.groups.restored} restored)` +
      (a
        ? `; at the end ${a.snapshots.groups.known} held (${a.snapshots.groups.members} members), ` +
          `${a.snapshots.groups.membersOnDisk} member copies on disk`
        : ''),
    `    retried answers: ${codes(w.retried)}`,
    `    unexpected answers:${list(w.unexpected, (u) => `op ${u.op} ${u.kind} ${u.code}: ${u.message.slice(0, 200)}`)}`,
    `    anomalies:${list(w.anomalies, (x) => `op ${x.op}: ${x.what}`)}`,
    `  faults (${report.faults.length}):`,
  );
  for (const fault of report.faults) {
    const hit = fault.hit;
    lines.push(
      `    ${fault.kind} (round ${fault.round}, ${Math.round(fault.durationMs / 1000)} s): hit ${hit.total} ops ` +
        `(${hit.creates} creates, ${hit.deletes} deletes, ${hit.snapshotOps} snapshot ops, ${hit.groupOps} group ops, ` +
        `${hit.aimed} aimed); ` +
        `retried ${codes(hit.retried)}` +
        (fault.error ? `; FAILED: ${fault.error.split('\n')[0]}` : ''),
    );
    for (const step of fault.steps) lines.push(`        ${step}`);
  }
  if (a) {
    lines.push(
      `  audit: ${a.known} volumes known to the orchestrator, ${a.onDisk} on disk in ${a.pools.length} pools ` +
        `(${a.pools.map((p) => `${p.node} ${p.volumes}`).join(', ')})`,
      `    leaked:${list(a.leaked, (v) => `${v.node}/${v.key} "${v.name ?? '?'}": ${v.reason}`)}`,
      `    lost:${list(a.lost, (v) => `${v.name} ${v.volumeId}: ${v.reason}`)}`,
      `    duplicated:${list(a.duplicated, (d) => `${d.name}: ${d.volumes.join(', ')}`)}`,
      `    torn:${list(a.torn, (v) => `${v.node}/${v.key} dir=${v.hasDir} record=${v.hasRecord}`)}`,
      `    pending:${list(a.pending, (p) => `${p.workflowId} (${p.type}, since ${p.startTime})`)}`,
      `    deletes acknowledged while the node was down:${list(a.deletesAckedWhileNodeDown, (d) => `op ${d.op} ${d.volumeId}`)}`,
      `    volume or snapshot IDs naming the wrong node:${list(a.misaddressed, (m) => `op ${m.op} ${m.name} ${m.volumeId}: the pool is ${m.poolOf}'s`)}`,
      `    restores answered off the snapshot's node:${list(a.restoresElsewhere, (r) => `op ${r.op} ${r.name} ${r.volumeId} from ${r.snapshotId}`)}`,
      `    left frozen:${list(a.frozen ?? [], (f) => f)}`,
      `  snapshot audit: ${a.snapshots.known} snapshots held by the orchestrator, ${a.snapshots.onDisk} on disk ` +
        `(${a.pools.map((p) => `${p.node} ${p.snapshots}`).join(', ')})`,
      `    leaked:${list(a.snapshots.leaked, (s) => `${s.node}/${s.key} "${s.name ?? '?'}": ${s.reason}`)}`,
      `    lost:${list(a.snapshots.lost, (s) => `${s.name} ${s.snapshotId}: ${s.reason}`)}`,
      `    duplicated:${list(a.snapshots.duplicated, (d) => `${d.name}: ${d.snapshots.join(', ')}`)}`,
      `    torn:${list(a.snapshots.torn, (s) => `${s.node}/${s.key} copy=${s.hasData} record=${s.hasRecord}`)}`,
      `    journal intents left:${list(
        a.pools.filter((p) => p.intents.length > 0),
        (p) => `${p.node}: ${p.intents.join(', ')}`,
      )}`,
    );
  }
  const issues = report.driverIssues;
  lines.push(
    `  driver processes that exited on their own:${list(issues.unexpectedExits, (e) => `${e.process} (${e.build}) at ${e.at}: ${e.signal ?? `code ${e.code}`}`)}`,
    `  log findings:${list(issues.logFindings, (f) => `${f.process}: ${f.lines.length} lines, e.g. ${f.lines[0]?.slice(0, 300)}`)}`,
    `  problems:${list(report.problems, (p) => p, 50)}`,
  );
  return lines.join('\n');
}

export function writeReport(file: string, report: SoakReport): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
}
