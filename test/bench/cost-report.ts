import type { DrainResult } from './drain';
import type { PhaseCost } from './phase-cost';
import type { BenchReport, LevelResult } from './report';
import { num, table } from './table';

/** Process groups in report order; the keys of PhaseUsage. */
export const GROUPS = ['controller', 'node agents', 'temporal'] as const;

const perOp = (cost: PhaseCost, value: number) => (cost.operations > 0 ? value / cost.operations : NaN);
const cpuTotal = (cost: PhaseCost) => GROUPS.reduce((sum, group) => sum + (cost.usage.cpuMs[group] ?? 0), 0);
const phases = (levels: LevelResult[]) =>
  levels.flatMap((level) =>
    level.cost
      ? (['create', 'delete'] as const).map((op) => ({ level, op, cost: (level.cost ?? {})[op] as PhaseCost }))
      : [],
  );

export function formatCosts(levels: LevelResult[]): string[] {
  const rows = phases(levels);
  if (rows.length === 0) return [];
  const out = [
    "Temporal's work per operation (the dev server's /metrics before and after each phase; RPCs are the frontend's)",
    table(
      ['conc', 'op', 'wf tasks', 'act tasks', 'heartbeats', 'RPCs', 'writes', 'mut. state', 'visibility'],
      rows.map(({ level, op, cost }) => {
        const server = cost.server;
        const value = (pick: (work: NonNullable<PhaseCost['server']>) => number) =>
          server ? num(perOp(cost, pick(server)), 2) : '-';
        return [
          String(level.concurrency),
          op,
          value((work) => work.workflowTasks),
          value((work) => work.activityTasks),
          value((work) => work.activityHeartbeats),
          value((work) => Object.values(work.rpcs).reduce((sum, count) => sum + count, 0)),
          value((work) => work.persistenceWrites),
          value((work) => work.mutableStateWrites),
          value((work) => work.visibilityWrites),
        ];
      }),
    ),
    'RPCs per operation by method (polls are long polls: their count depends on idle time, not on the work):',
  ];
  for (const { level, op, cost } of rows) {
    const rpcs = Object.entries(cost.server?.rpcs ?? {})
      .sort(([, a], [, b]) => b - a)
      .map(([method, count]) => `${method} ${num(perOp(cost, count), 2)}`);
    out.push(`  conc ${level.concurrency} ${op}: ${rpcs.join(', ') || '-'}`);
  }
  out.push('Persistence writes per operation by kind:');
  for (const { level, op, cost } of rows) {
    const writes = Object.entries(cost.server?.writes ?? {})
      .sort(([, a], [, b]) => b - a)
      .map(([kind, count]) => `${kind} ${num(perOp(cost, count), 2)}`);
    out.push(`  conc ${level.concurrency} ${op}: ${writes.join(', ') || '-'}`);
  }
  out.push('', 'CPU ms per operation (/proc/<pid>/stat, user + system) and peak RSS in MB (/proc/<pid>/status VmHWM)');
  out.push(costTable(rows.map(({ level, op, cost }) => [String(level.concurrency), op, cost])));
  return out;
}

function costTable(rows: [string, string, PhaseCost][]): string {
  return table(
    ['conc', 'op', ...GROUPS.map((group) => `CPU ${group}`), 'CPU total', ...GROUPS.map((group) => `RSS ${group}`)],
    rows.map(([conc, op, cost]) => [
      conc,
      op,
      ...GROUPS.map((group) => num(perOp(cost, cost.usage.cpuMs[group] ?? 0))),
      num(perOp(cost, cpuTotal(cost))),
      ...GROUPS.map((group) => num(cost.usage.peakRssMb[group] ?? NaN, 0)),
    ]),
  );
}

const seconds = (value: number | undefined) => (value === undefined ? 'never' : `${(value / 1000).toFixed(2)} s`);

export function formatDrain(drain: DrainResult): string[] {
  const answers = Object.entries(drain.requestAnswers)
    .map(([code, count]) => `${count} ${code}`)
    .join(', ');
  return [
    `Drain: ${drain.count} deletions waiting for ${drain.nodeId} while its agent is down, then it starts again`,
    `  put into its pool beforehand (storage backend, in the benchmark's process): ${seconds(drain.fill.wallMs)}`,
    `  deletions requested while down: ${answers} in ${seconds(drain.requestWallMs)}; ` +
      `${drain.onDiskWhileDown} volumes still on disk`,
    `  after the agent's spawn: ready ${seconds(drain.readyMs)}, first volume gone ${seconds(drain.firstGoneMs)}, ` +
      `all gone ${seconds(drain.allGoneMs)}, every DeleteVolume OK ${seconds(drain.confirmedMs)}`,
    costTable([
      ['-', 'waiting', drain.waitCost],
      ['-', 'draining', drain.drainCost],
      ...(drain.confirmCost ? [['-', 'confirming', drain.confirmCost] as [string, string, PhaseCost]] : []),
    ]),
  ];
}

interface Goal {
  what: string;
  measured: number | undefined;
  limit: number;
  atLeast?: boolean;
  unit: string;
}

/** The goals of issue 10, judged on this run (figures only: a missed goal is not a failure of the benchmark). */
export function formatGoals(report: BenchReport): string[] {
  const level = (concurrency: number) => report.durable.find((candidate) => candidate.concurrency === concurrency);
  const costs = [
    ...phases(report.durable).map(({ cost }) => cost),
    ...(report.drain ? [report.drain.waitCost, report.drain.drainCost, report.drain.confirmCost] : []),
  ];
  const peak = (group: string) =>
    costs.length === 0 ? undefined : Math.max(...costs.map((cost) => cost?.usage.peakRssMb[group] ?? 0));
  const worstCpu = phases(report.durable).map(({ cost }) => perOp(cost, cpuTotal(cost)));
  const goals: Goal[] = [
    { what: 'CreateVolume p50 at concurrency 1', measured: level(1)?.create.stats.p50, limit: 40, unit: 'ms' },
    { what: 'DeleteVolume p50 at concurrency 1', measured: level(1)?.delete.stats.p50, limit: 40, unit: 'ms' },
    {
      what: 'creates per second at concurrency 32',
      measured: level(32)?.create.stats.opsPerSec,
      limit: 60,
      atLeast: true,
      unit: '/s',
    },
    {
      what: 'CPU per operation, all processes (worst phase)',
      measured: worstCpu.length > 0 ? Math.max(...worstCpu) : undefined,
      limit: 30,
      unit: 'ms',
    },
    {
      what: `${report.drain?.count ?? 1000} waiting deletions drained after the node starts`,
      measured: report.drain?.allGoneMs === undefined ? undefined : report.drain.allGoneMs / 1000,
      limit: 10,
      unit: 's',
    },
    { what: 'controller peak RSS', measured: peak('controller'), limit: 200, unit: 'MB' },
    { what: 'node agent peak RSS', measured: peak('node agents'), limit: 120, unit: 'MB' },
  ];
  return [
    'Goals (issue 10)',
    table(
      ['goal', 'measured', 'limit', ''],
      goals.map((goal) => [
        goal.what,
        goal.measured === undefined ? 'not run' : `${num(goal.measured)} ${goal.unit}`,
        `${goal.atLeast ? '>=' : '<='} ${goal.limit} ${goal.unit}`,
        goal.measured === undefined
          ? ''
          : (goal.atLeast ? goal.measured >= goal.limit : goal.measured <= goal.limit)
            ? 'met'
            : 'missed',
      ]),
    ),
  ];
}
