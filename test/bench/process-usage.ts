import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

/** A process the benchmark accounts for, e.g. { name: 'node-a', group: 'node agents', pid }. */
export interface WatchedProcess {
  name: string;
  group: string;
  pid: number;
}

/** CPU and peak memory of each group over one phase. */
export interface PhaseUsage {
  /** CPU milliseconds (user + system, all threads) spent in the phase, summed over the group. */
  cpuMs: Record<string, number>;
  /** Highest resident set of any one process of the group during the phase, MB (10^6 bytes). */
  peakRssMb: Record<string, number>;
  /**
   * CPU milliseconds by thread, summed over the group: `main` (the JavaScript main thread), `other node threads`
   * (worker threads such as the controller's workflow thread, V8's garbage collection and compiler helpers, libuv's
   * pool: Node names them all `node`), else the thread's own name (comm): `tokio-runtime-w` is the Temporal core's
   * runtime. Threads that ended during the phase are not in it.
   */
  threadCpuMs?: Record<string, Record<string, number>>;
}

const CLOCK_TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of a process, all threads, in ms; undefined once it has exited. */
export function cpuMsOf(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // fields 14 and 15 of proc(5)
    return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** The CPU ms (utime + stime) of each live thread of a process, by thread id, with its name. */
export function threadCpuOf(pid: number): Map<string, { name: string; ms: number }> {
  const out = new Map<string, { name: string; ms: number }>();
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const name = tid === String(pid) ? 'main' : comm === 'node' ? 'other node threads' : comm;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(tid, { name, ms: ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

/** A VmHWM / VmRSS line of /proc/<pid>/status in MB (10^6 bytes); undefined once the process has exited. */
export function memoryMbOf(pid: number, field: 'VmHWM' | 'VmRSS'): number | undefined {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kiB = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1];
    return kiB === undefined ? undefined : (Number(kiB) * 1024) / 1e6;
  } catch {
    return undefined;
  }
}

/** Resets a process's peak RSS (VmHWM) to its current RSS, so that a peak can be read per phase (Linux >= 4.0). */
function resetPeak(pid: number): void {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    // Not ours or gone: its peak then covers its whole life, which is still an upper bound.
  }
}

export interface PhaseStart {
  cpuMs: Map<number, number>;
  threads: Map<number, Map<string, { name: string; ms: number }>>;
}

/**
 * Accounts CPU and peak RSS per group of processes between begin() and end(). Processes may be added while
 * watching (a restarted node agent): a process first seen at end() counts all its CPU since it started.
 */
export class ProcessWatch {
  private readonly processes = new Map<number, WatchedProcess>();

  add(process: WatchedProcess): void {
    this.processes.set(process.pid, process);
  }

  remove(pid: number): void {
    this.processes.delete(pid);
  }

  /** Each group's heaviest process's resident memory now. */
  resident(): Record<string, ResidentMb> {
    return residentByGroup([...this.processes.values()]);
  }

  begin(): PhaseStart {
    const cpuMs = new Map<number, number>();
    const threads = new Map<number, Map<string, { name: string; ms: number }>>();
    for (const { pid } of this.processes.values()) {
      resetPeak(pid);
      cpuMs.set(pid, cpuMsOf(pid) ?? 0);
      threads.set(pid, threadCpuOf(pid));
    }
    return { cpuMs, threads };
  }

  end(start: PhaseStart): PhaseUsage {
    const usage: PhaseUsage = { cpuMs: {}, peakRssMb: {} };
    for (const { pid, group } of this.processes.values()) {
      const now = cpuMsOf(pid);
      if (now !== undefined) usage.cpuMs[group] = (usage.cpuMs[group] ?? 0) + now - (start.cpuMs.get(pid) ?? 0);
      const peak = memoryMbOf(pid, 'VmHWM');
      if (peak !== undefined) usage.peakRssMb[group] = Math.max(usage.peakRssMb[group] ?? 0, peak);
      const threads = (usage.threadCpuMs ??= {});
      const byName = (threads[group] ??= {});
      const before = start.threads.get(pid);
      for (const [tid, thread] of threadCpuOf(pid)) {
        const spent = thread.ms - (before?.get(tid)?.ms ?? 0);
        byName[thread.name] = (byName[thread.name] ?? 0) + spent;
      }
    }
    return usage;
  }
}

/** Resident memory of a process now, from /proc/<pid>/status, in MB (10^6 bytes). */
export interface ResidentMb {
  rss: number;
  /** Anonymous memory: heaps, stacks, the native runtime's buffers; what the process itself holds. */
  anon: number;
  /** File-backed: the node binary and native libraries, shared with other processes mapping the same files. */
  file: number;
}

export function residentMbOf(pid: number): ResidentMb | undefined {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string) => {
      const kiB = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1];
      return kiB === undefined ? NaN : (Number(kiB) * 1024) / 1e6;
    };
    return { rss: field('VmRSS'), anon: field('RssAnon'), file: field('RssFile') };
  } catch {
    return undefined;
  }
}

/** The process of each group with the largest RSS now: a group's idle figure is its heaviest member's. */
export function residentByGroup(processes: readonly WatchedProcess[]): Record<string, ResidentMb> {
  const out: Record<string, ResidentMb> = {};
  for (const { pid, group } of processes) {
    const now = residentMbOf(pid);
    if (now && !(now.rss <= (out[group]?.rss ?? -1))) out[group] = now;
  }
  return out;
}
