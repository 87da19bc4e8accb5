import type { PhaseCost } from './phase-cost';
import type { ResidentMb } from './process-usage';
import type { BenchReport, LevelResult } from './report';
import { num, table } from './table';

/** The process roles of issue 23, in report order: the keys of PhaseUsage and of the idle figures. */
export const ROLES = ['controller', 'node agents', 'temporal'] as const;

/** The driver's own processes: what a cluster pays for besides its Temporal service. */
const DRIVER: readonly string[] = ['controller', 'node agents'];

const MIB_IN_MB = 1.048576;

/** CPU ms of one role per operation of a phase; NaN when the phase made none. */
const perOp = (cost: PhaseCost, role: string) =>
  cost.operations > 0 ? (cost.usage.cpuMs[role] ?? 0) / cost.operations : NaN;

/**
 * CPU ms each role spent per create+delete pair at one level: its CPU per create plus its CPU per delete (node
 * agents summed over every agent: what the cluster's nodes spent together). `driver` is controller + node agents.
 */
export function pairCpuMs(level: LevelResult): Record<string, number> | undefined {
  if (!level.cost) return undefined;
  const { create, delete: del } = level.cost;
  const out: Record<string, number> = {};
  for (const role of ROLES) out[role] = perOp(create, role) + perOp(del, role);
  out.driver = DRIVER.reduce((sum, role) => sum + (out[role] ?? 0), 0);
  return out;
}

/** The highest peak RSS (MB) of a role over the given phases; undefined when none measured it. */
export function peakOf(costs: readonly (PhaseCost | undefined)[], role: string): number | undefined {
  const peaks = costs.flatMap((cost) => {
    const peak = cost?.usage.peakRssMb[role];
    return peak === undefined ? [] : [peak];
  });
  return peaks.length === 0 ? undefined : Math.max(...peaks);
}

/** CPU ms per create+delete pair of one role at one level, by thread name, largest first. */
export function pairThreadCpuMs(level: LevelResult, role: string): [string, number][] {
  if (!level.cost) return [];
  const out: Record<string, number> = {};
  for (const cost of [level.cost.create, level.cost.delete]) {
    if (cost.operations === 0) continue;
    for (const [name, ms] of Object.entries(cost.usage.threadCpuMs?.[role] ?? {}))
      out[name] = (out[name] ?? 0) + ms / cost.operations;
  }
  return Object.entries(out).sort(([, a], [, b]) => b - a);
}

const levelCosts = (levels: readonly LevelResult[]) =>
  levels.flatMap((level) => (level.cost ? [level.cost.create, level.cost.delete] : []));
const drainCosts = (report: BenchReport) =>
  report.drain ? [report.drain.waitCost, report.drain.drainCost, report.drain.confirmCost] : [];

const mb = (value: number | undefined) => (value === undefined ? '-' : num(value, 0));
const resident = (value: ResidentMb | undefined) =>
  value === undefined ? '-' : `${num(value.rss, 0)} (${num(value.anon, 0)} anon)`;

/** Per role: CPU per create+delete at each level, RSS at idle (after start, after the levels) and at peak. */
export function formatRoles(report: BenchReport): string[] {
  const levels = report.durable.filter((level) => level.cost);
  if (levels.length === 0) return [];
  const rows = ROLES.map((role) => [
    role,
    ...levels.map((level) => num(pairCpuMs(level)?.[role] ?? NaN)),
    num(report.idle?.start.cpuMsPerSecond[role] ?? NaN),
    resident(report.idle?.start.resident[role]),
    resident(report.idle?.afterLevels?.resident[role]),
    mb(peakOf(levelCosts(levels), role)),
    mb(peakOf(drainCosts(report), role)),
  ]);
  rows.push(['driver (controller + node agents)', ...levels.map((level) => num(pairCpuMs(level)?.driver ?? NaN))]);
  const threads = levels.flatMap((level) =>
    DRIVER.map((role) => {
      const named = pairThreadCpuMs(level, role).filter(([, ms]) => ms >= 0.05);
      return `  c${level.concurrency} ${role}: ${named.map(([name, ms]) => `${name} ${num(ms)}`).join(', ') || '-'}`;
    }),
  );
  return [
    ...formatSupervisor(report),
    ...formatLifecycles(report),
    `Per process role (topology: ${String(report.options.topology ?? 'none')}): CPU ms per create+delete; RSS in MB ` +
      '(10^6 bytes) of the heaviest process of the role, idle = VmRSS after the settle, peak = VmHWM',
    table(
      [
        'role',
        ...levels.map((level) => `CPU c${level.concurrency}`),
        'idle CPU ms/s (all)',
        'idle RSS at start',
        'idle RSS after levels',
        'peak RSS, levels',
        'peak RSS, drain',
      ],
      rows,
    ),
    'CPU ms per create+delete by thread (/proc/<pid>/task/<tid>/stat):',
    ...threads,
  ];
}

export interface Goal {
  what: string;
  measured: number | undefined;
  /** Undefined: a figure to watch, with no limit set. */
  limit: number | undefined;
  unit: string;
}

/** The goals of issue 23, on this run's figures. */
export function driverGoals(report: BenchReport): Goal[] {
  const c5 = report.durable.find((level) => level.concurrency === 5);
  const withTopology = report.options.topology === 'node';
  const levels = report.durable.filter((level) => level.cost);
  const idle = report.idle;
  const growth = (role: string) => {
    const before = idle?.start.resident[role]?.rss;
    const after = idle?.afterLevels?.resident[role]?.rss;
    return before === undefined || after === undefined ? undefined : after - before;
  };
  return [
    {
      what: `driver CPU per create+delete, topology, concurrency 5`,
      measured: withTopology && c5 ? pairCpuMs(c5)?.driver : undefined,
      limit: 14,
      unit: 'ms',
    },
    {
      what: 'node agent RSS at idle',
      measured: idle?.start.resident['node agents']?.rss,
      limit: 70 * MIB_IN_MB,
      unit: 'MB',
    },
    {
      what: 'node agent peak RSS under load (levels)',
      measured: peakOf(levelCosts(levels), 'node agents'),
      limit: 90 * MIB_IN_MB,
      unit: 'MB',
    },
    {
      what: 'controller RSS at idle',
      measured: idle?.start.resident.controller?.rss,
      limit: 120 * MIB_IN_MB,
      unit: 'MB',
    },
    {
      what: 'controller peak RSS in the drain (bounded)',
      measured: peakOf(drainCosts(report), 'controller'),
      limit: undefined,
      unit: 'MB',
    },
    {
      what: 'dev supervisor RSS at idle',
      measured: report.supervisor?.idle.resident?.rss,
      limit: 40 * MIB_IN_MB,
      unit: 'MB',
    },
    ...lifecycleGoals(report),
    {
      what: 'controller idle RSS growth over the levels',
      measured: growth('controller'),
      limit: undefined,
      unit: 'MB',
    },
    {
      what: 'node agent idle RSS growth over the levels',
      measured: growth('node agents'),
      limit: undefined,
      unit: 'MB',
    },
  ];
}

export function judge(goal: Goal): string {
  if (goal.measured === undefined || goal.limit === undefined) return '';
  return goal.measured <= goal.limit ? 'met' : 'missed';
}

export function formatDriverGoals(report: BenchReport): string[] {
  return [
    "Goals (issue 23, the driver's own cost; MiB limits shown in MB)",
    table(
      ['goal', 'measured', 'limit', ''],
      driverGoals(report).map((goal) => [
        goal.what,
        goal.measured === undefined ? 'not run' : `${num(goal.measured)} ${goal.unit}`,
        goal.limit === undefined ? '-' : `<= ${num(goal.limit)} ${goal.unit}`,
        judge(goal),
      ]),
    ),
  ];
}

/** RSS growth a role may show over the lifecycles and still count as "no growth": the scatter of one sample. */
const LIFECYCLE_GROWTH_LIMIT_MB = 10;

function lifecycleGoals(report: BenchReport): Goal[] {
  const result = report.lifecycles;
  const count = result?.samples.at(-1)?.lifecycles;
  return DRIVER.map((role) => ({
    what: `${role} RSS growth over ${count ?? 'the'} lifecycles (after the first ${result?.batch ?? '-'})`,
    measured: result?.growthMb[role],
    limit: LIFECYCLE_GROWTH_LIMIT_MB,
    unit: 'MB',
  }));
}

function formatLifecycles(report: BenchReport): string[] {
  const result = report.lifecycles;
  if (!result || result.samples.length === 0) return [];
  const roles = ROLES.filter((role) => result.samples[0]?.resident[role]);
  return [
    `RSS (MB) over lifecycles at concurrency ${result.concurrency}, ${result.batch} per batch, after a 2 s settle:`,
    table(
      ['lifecycles', ...roles],
      result.samples.map((sample) => [
        String(sample.lifecycles),
        ...roles.map((role) => resident(sample.resident[role])),
      ]),
    ),
  ];
}

function formatSupervisor(report: BenchReport): string[] {
  const result = report.supervisor;
  if (!result) return [];
  return [
    `The dev supervisor (\`durable-csi dev --nodes ${result.nodes}\`, its own stack), ${result.operations} creates ` +
      `then deletes at concurrency ${result.concurrency}:`,
    table(
      ['role', 'CPU ms per create+delete', 'idle CPU ms/s', 'idle RSS', 'peak RSS, ops'],
      [
        [
          'supervisor',
          num(result.cpuMsPerPair),
          num(result.idle.cpuMsPerSecond ?? NaN),
          resident(result.idle.resident),
          mb(result.peakRssMb),
        ],
      ],
    ),
  ];
}
