import type { ChurnReport } from './churn';
import type { LatencyStats } from '../stats';

export interface ScaleRow {
  nodes: number;
  registeredMs: number;
  levels: { concurrency: number; create: LatencyStats; delete: LatencyStats }[];
  historyPerOp: { events: number; bytes: number };
  idle: {
    rpcPerSecond: Record<string, number>;
    /** CPU seconds per second, per process group (database: PostgreSQL, under the prod server). */
    cpuPerSecond: { temporal: number; database: number; controller: number; hosts: number };
    recordBytesPerHourPerNode: number;
    largestRecord: { events: number; bytes: number };
    /** Persistence writes per second (mutable state, tasks, timers...), and by operation. */
    writesPerSecond: number;
    writesByOperation: Record<string, number>;
  };
  /**
   * What one operation (a create or a delete, averaged over both) cost the server beyond the idle background:
   * frontend RPCs (polls included), persistence writes, visibility writes. The inputs of the sizing guide
   * (docs/scale.md).
   */
  serverPerOp: { rpcs: number; writes: number; visibilityWrites: number };
  /** CPU ms per operation; net: minus the idle background over the same time. */
  cpuPerOp: Record<'temporal' | 'database' | 'controller', { raw: number; net: number }>;
  server: 'dev' | 'prod';
  memoryMiB: { temporal: { rss: number; peak: number }; controller: { rss: number; peak: number }; hostsPeak: number };
  /** --churn: the rolling restart and the crash, after the figures above. */
  churn?: ChurnReport;
}

const ms = (value: number) => `${Math.round(value)}`;

/** One line per node count: what grows with the cluster, and what must not. */
export function printScaleTable(rows: ScaleRow[]): void {
  const header = [
    'nodes',
    'create p50/p99 c1',
    'delete p50/p99 c1',
    'create p50/p99 c8',
    'delete p50/p99 c8',
    'hist ev/B per op',
    'idle RPC/s',
    'idle writes/s',
    'idle CPU ms/s temporal/db/ctl/nodes',
    'record B/h/node',
    'CPU ms/op temporal/db/ctl (net)',
    'per op RPC/writes/vis',
    'RSS MiB temporal/ctl/host',
  ];
  const lines = rows.map((row) => {
    const level = (c: number) => row.levels.find((l) => l.concurrency === c)!;
    const pair = (stats: LatencyStats) => `${ms(stats.p50)}/${ms(stats.p99)}`;
    const rpc = Object.values(row.idle.rpcPerSecond).reduce((sum, rate) => sum + rate, 0);
    return [
      String(row.nodes),
      pair(level(1).create),
      pair(level(1).delete),
      pair(level(8).create),
      pair(level(8).delete),
      `${ms(row.historyPerOp.events)}/${ms(row.historyPerOp.bytes)}`,
      rpc.toFixed(1),
      row.idle.writesPerSecond.toFixed(1),
      [
        row.idle.cpuPerSecond.temporal,
        row.idle.cpuPerSecond.database,
        row.idle.cpuPerSecond.controller,
        row.idle.cpuPerSecond.hosts,
      ]
        .map((seconds) => ms(seconds * 1000))
        .join('/'),
      ms(row.idle.recordBytesPerHourPerNode),
      [row.cpuPerOp.temporal, row.cpuPerOp.database, row.cpuPerOp.controller].map((c) => c.net.toFixed(1)).join('/'),
      [row.serverPerOp.rpcs, row.serverPerOp.writes, row.serverPerOp.visibilityWrites]
        .map((value) => value.toFixed(1))
        .join('/'),
      `${row.memoryMiB.temporal.peak}/${row.memoryMiB.controller.peak}/${row.memoryMiB.hostsPeak}`,
    ];
  });
  printTable(header, lines);
}

/** --churn: one line per node count that churned (issue 38 item 2). */
export function printChurnTable(rows: ScaleRow[]): void {
  const churned = rows.filter((row) => row.churn);
  if (!churned.length) return;
  const header = [
    'nodes',
    'waves x agents',
    'wave p50/max s',
    'rolling s',
    'create p50/p99/max c8',
    'delete p50/p99/max c8',
    'ops (restarting node)',
    'crashed',
    'offline after s read/listed',
    'live again s',
    'deletes while down',
    'deletes after return p50/max s',
    'control backlog max/age s',
    'live after',
    'largest record ev/B',
  ];
  const seconds = (value: number) => (value / 1000).toFixed(1);
  const triple = (stats: LatencyStats) => `${ms(stats.p50)}/${ms(stats.p99)}/${ms(stats.max)}`;
  const lines = churned.map(({ nodes, churn }) => {
    const { rolling, crash, operations } = churn!;
    return [
      String(nodes),
      `${rolling.waves} x ${rolling.batch}`,
      `${seconds(rolling.waveMs.p50)}/${seconds(rolling.waveMs.max)}`,
      seconds(rolling.wallMs),
      triple(operations.create),
      triple(operations.delete),
      `${operations.create.count + operations.delete.count} (${operations.onRestartingNode.create.count + operations.onRestartingNode.delete.count})`,
      String(crash.nodes),
      `${seconds(crash.offlineAfterMs)}/${crash.offlineListedAfterMs === undefined ? '>300' : seconds(crash.offlineListedAfterMs)}`,
      seconds(crash.liveAgainAfterMs),
      String(crash.deletesAnsweredWhileDown),
      `${seconds(crash.deletesAfterReturn.p50)}/${seconds(crash.deletesAfterReturn.max)}`,
      `${churn!.controlBacklog.maxCount}/${seconds(churn!.controlBacklog.maxAgeMs)}`,
      `${churn!.liveAfter}/${nodes}`,
      `${churn!.largestRecord.events}/${churn!.largestRecord.bytes}`,
    ];
  });
  printTable(header, lines);
}

function printTable(header: string[], lines: string[][]): void {
  const widths = header.map((title, index) => Math.max(title.length, ...lines.map((line) => line[index]!.length)));
  const format = (cells: string[]) => cells.map((cell, index) => cell.padEnd(widths[index]!)).join('  ');
  process.stdout.write(`${format(header)}\n${lines.map(format).join('\n')}\n`);
}
