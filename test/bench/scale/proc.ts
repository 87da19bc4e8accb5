import fs from 'node:fs';

/** CPU time (user + system) a process has used, in ms, from /proc (clock ticks are 100 Hz on Linux). */
export function cpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Resident and peak resident memory in MiB. */
export function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { rss: Math.round(kib('VmRSS') / 1024), peak: Math.round(kib('VmHWM') / 1024) };
}

/**
 * Counters of a Prometheus text exposition summed by one label (e.g. operation), filtered by metric name and by the
 * service that counted them: the frontend counts what clients send, and the history and matching services count
 * the same call again as it reaches them.
 */
export async function scrapeCounters(
  url: string,
  metric: string,
  label: string,
  service = 'frontend',
): Promise<Map<string, number>> {
  const text = await (await fetch(url)).text();
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`) && !line.startsWith(`${metric} `)) continue;
    if (!line.includes(`service_name="${service}"`)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    const key = new RegExp(`${label}="([^"]*)"`).exec(line)?.[1] ?? '';
    sums.set(key, (sums.get(key) ?? 0) + value);
  }
  return sums;
}

export function difference(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  const delta = new Map<string, number>();
  for (const [key, value] of after) {
    const change = value - (before.get(key) ?? 0);
    if (change > 0) delta.set(key, change);
  }
  return delta;
}
