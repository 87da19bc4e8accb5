import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { formatCosts, formatDrain, formatGoals } from './cost-report';
import { formatDriverGoals, formatRoles } from './role-report';
import type { DrainResult } from './drain';
import type { LifecycleResult } from './lifecycles';
import type { SupervisorResult } from './supervisor';
import type { PhaseCost } from './phase-cost';
import type { ResidentMb } from './process-usage';
import type { LatencyStats } from './stats';
import { ms, num, table } from './table';

export interface OpResult {
  stats: LatencyStats;
  /** Extra attempts after a retriable answer (ABORTED, UNAVAILABLE, DEADLINE_EXCEEDED), summed over calls. */
  retries: number;
  /** Calls that needed at least one retry. */
  retriedCalls: number;
  /** Retriable answers by gRPC status name. */
  retryCodes: Record<string, number>;
  /** Calls that failed for good, with their first few messages. */
  failures: number;
  failureSamples: string[];
}

export interface LevelResult {
  concurrency: number;
  create: OpResult;
  delete: OpResult;
  /** Durable runs only: how many volumes each node received. */
  placement?: Record<string, number>;
  /** Volume keys found on disk after the deletes (must be empty). */
  leftovers: string[];
  /** Durable runs only: what each phase cost the server and the processes. */
  cost?: { create: PhaseCost; delete: PhaseCost };
}

/** A group's figures at rest: its heaviest process's resident memory, and its CPU (all its processes). */
export interface IdleFigures {
  resident: Record<string, ResidentMb>;
  cpuMsPerSecond: Record<string, number>;
}

export interface BenchReport {
  startedAt: string;
  /** 1-minute load average at the start and at the end: the machine may be shared. */
  loadAverage: { start: number; end?: number };
  machine: ReturnType<typeof machineInfo>;
  options: Record<string, unknown>;
  durable: LevelResult[];
  direct: LevelResult[];
  drain?: DrainResult;
  /** RSS per role over many lifecycles after the levels (issue 23: no growth over 2,000). */
  lifecycles?: LifecycleResult;
  /** The dev supervisor (`durable-csi dev`), on a stack of its own. */
  supervisor?: SupervisorResult;
  /** At rest: after start, and after the levels (before the drain). */
  idle?: { start: IdleFigures; afterLevels?: IdleFigures };
  priceOfDurability: {
    concurrency: number;
    createP50Ratio: number;
    createOpsRatio: number;
    deleteP50Ratio: number;
    deleteOpsRatio: number;
  }[];
  ok: boolean;
  problems: string[];
}

export function machineInfo() {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    totalMemGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
  };
}

export function priceOfDurability(durable: LevelResult[], direct: LevelResult[]): BenchReport['priceOfDurability'] {
  return durable.flatMap((slow) => {
    const fast = direct.find((level) => level.concurrency === slow.concurrency);
    if (!fast) return [];
    return [
      {
        concurrency: slow.concurrency,
        createP50Ratio: slow.create.stats.p50 / fast.create.stats.p50,
        createOpsRatio: fast.create.stats.opsPerSec / slow.create.stats.opsPerSec,
        deleteP50Ratio: slow.delete.stats.p50 / fast.delete.stats.p50,
        deleteOpsRatio: fast.delete.stats.opsPerSec / slow.delete.stats.opsPerSec,
      },
    ];
  });
}

function levelTable(levels: LevelResult[], withRetries: boolean): string {
  const header = ['conc', 'op', 'n', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms', 'max ms', 'ops/s'];
  if (withRetries) header.push('retries', 'retried', 'failed');
  const rows = levels.flatMap((level) =>
    (['create', 'delete'] as const).map((op) => {
      const { stats, retries, retriedCalls, failures } = level[op];
      const row = [
        String(level.concurrency),
        op,
        String(stats.count),
        ms(stats.p50),
        ms(stats.p90),
        ms(stats.p99),
        ms(stats.mean),
        ms(stats.max),
        num(stats.opsPerSec),
      ];
      if (withRetries) row.push(String(retries), String(retriedCalls), String(failures));
      return row;
    }),
  );
  return table(header, rows);
}

export function formatReport(report: BenchReport): string {
  const { machine } = report;
  const out = [
    `machine: ${machine.cpus} CPUs (${machine.cpuModel}), ${machine.totalMemGiB} GiB, ${machine.platform}, node ${machine.node}`,
    `load average (1 min): ${num(report.loadAverage.start, 2)} at the start, ${num(report.loadAverage.end ?? NaN, 2)} at the end`,
    `options: ${JSON.stringify(report.options)}`,
    '',
    'Durable (CSI gRPC -> controller -> Temporal workflow -> node agent activity -> dir pool)',
    levelTable(report.durable, true),
  ];
  const placements = report.durable.filter((level) => level.placement);
  if (placements.length > 0) {
    out.push('', 'placement (volumes per node):');
    for (const level of placements) out.push(`  conc ${level.concurrency}: ${JSON.stringify(level.placement)}`);
  }
  const retryCodes = report.durable.filter((level) => level.create.retries + level.delete.retries > 0);
  for (const level of retryCodes) {
    out.push(
      `  conc ${level.concurrency} retriable answers: create ${JSON.stringify(level.create.retryCodes)}, ` +
        `delete ${JSON.stringify(level.delete.retryCodes)}`,
    );
  }
  out.push('', ...formatCosts(report.durable));
  out.push('', ...formatRoles(report));
  if (report.drain) out.push('', ...formatDrain(report.drain));
  out.push('', 'Direct (DirBackend in-process, one pool, no Temporal, no gRPC)', levelTable(report.direct, false));
  out.push(
    '',
    'The price of durability (durable p50 / direct p50; direct ops/s / durable ops/s)',
    table(
      ['conc', 'create p50 x', 'create ops/s x', 'delete p50 x', 'delete ops/s x'],
      report.priceOfDurability.map((ratio) => [
        String(ratio.concurrency),
        num(ratio.createP50Ratio),
        num(ratio.createOpsRatio),
        num(ratio.deleteP50Ratio),
        num(ratio.deleteOpsRatio),
      ]),
    ),
  );
  out.push('', ...formatGoals(report));
  out.push('', ...formatDriverGoals(report));
  out.push('', report.ok ? 'result: OK' : `result: FAILED\n  ${report.problems.join('\n  ')}`);
  return out.join('\n');
}

export function writeJson(file: string, report: BenchReport): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
}
