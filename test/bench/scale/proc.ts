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

export function difference(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  const delta = new Map<string, number>();
  for (const [key, value] of after) {
    const change = value - (before.get(key) ?? 0);
    if (change > 0) delta.set(key, change);
  }
  return delta;
}

/** The process and all its descendants (PostgreSQL's backends are children of its postmaster). */
export function processTree(root: number | undefined): number[] {
  if (!root) return [];
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // it exited while we read
    }
  }
  const tree: number[] = [];
  for (let queue = [root]; queue.length;) {
    const pid = queue.shift()!;
    tree.push(pid);
    queue = [...queue, ...(children.get(pid) ?? [])];
  }
  return tree;
}

/** The postmaster's PID from its cluster directory (the first line of data/postmaster.pid). */
export function postmasterPid(clusterDir: string): number | undefined {
  try {
    return Number(fs.readFileSync(`${clusterDir}/data/postmaster.pid`, 'utf8').split('\n')[0]) || undefined;
  } catch {
    return undefined;
  }
}
