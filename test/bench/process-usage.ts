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

  begin(): { cpuMs: Map<number, number> } {
    const cpuMs = new Map<number, number>();
    for (const { pid } of this.processes.values()) {
      resetPeak(pid);
      cpuMs.set(pid, cpuMsOf(pid) ?? 0);
    }
    return { cpuMs };
  }

  end(start: { cpuMs: Map<number, number> }): PhaseUsage {
    const usage: PhaseUsage = { cpuMs: {}, peakRssMb: {} };
    for (const { pid, group } of this.processes.values()) {
      const now = cpuMsOf(pid);
      if (now !== undefined) usage.cpuMs[group] = (usage.cpuMs[group] ?? 0) + now - (start.cpuMs.get(pid) ?? 0);
      const peak = memoryMbOf(pid, 'VmHWM');
      if (peak !== undefined) usage.peakRssMb[group] = Math.max(usage.peakRssMb[group] ?? 0, peak);
    }
    return usage;
  }
}
