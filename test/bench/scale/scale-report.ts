import type { LatencyStats } from '../stats';

export interface ScaleRow {
  nodes: number;
  registeredMs: number;
  levels: { concurrency: number; create: LatencyStats; delete: LatencyStats }[];
  historyPerOp: { events: number; bytes: number };
  idle: {
    rpcPerSecond: Record<string, number>;
    /** CPU seconds per second, per process group. */
    cpuPerSecond: { temporal: number; controller: number; hosts: number };
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
  cpuPerOp: { temporal: { raw: number; net: number }; controller: { raw: number; net: number } };
  memoryMiB: { temporal: { rss: number; peak: number }; controller: { rss: number; peak: number }; hostsPeak: number };
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
    'idle CPU ms/s temporal/ctl/nodes',
    'record B/h/node',
    'CPU ms/op temporal/ctl (net)',
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
      [row.idle.cpuPerSecond.temporal, row.idle.cpuPerSecond.controller, row.idle.cpuPerSecond.hosts]
        .map((seconds) => ms(seconds * 1000))
        .join('/'),
      ms(row.idle.recordBytesPerHourPerNode),
      `${row.cpuPerOp.temporal.net.toFixed(1)}/${row.cpuPerOp.controller.net.toFixed(1)}`,
      [row.serverPerOp.rpcs, row.serverPerOp.writes, row.serverPerOp.visibilityWrites]
        .map((value) => value.toFixed(1))
        .join('/'),
      `${row.memoryMiB.temporal.peak}/${row.memoryMiB.controller.peak}/${row.memoryMiB.hostsPeak}`,
    ];
  });
  const widths = header.map((title, index) => Math.max(title.length, ...lines.map((line) => line[index]!.length)));
  const format = (cells: string[]) => cells.map((cell, index) => cell.padEnd(widths[index]!)).join('  ');
  process.stdout.write(`${format(header)}\n${lines.map(format).join('\n')}\n`);
}
