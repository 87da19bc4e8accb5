import fs from 'node:fs';
import { PoolLayout, isProcessAlive, lockHolder } from '../storage/pool/pool-layout';

export interface PoolHolder {
  nodeId: string;
  pool: string;
  pid: number;
  /** Its command line, where /proc tells it. */
  command?: string;
}

/**
 * The live processes holding these pools' locks (storage/pool/pool-layout.ts), however they were started: a node agent
 * the dev stack spawned, one restarted by hand with the command the stack printed, or one left by an earlier run.
 */
export function poolHolders(pools: { nodeId: string; pool: string }[]): PoolHolder[] {
  const holders: PoolHolder[] = [];
  for (const { nodeId, pool } of pools) {
    const pid = lockHolderOf(pool);
    if (pid === undefined || pid === process.pid || !isProcessAlive(pid)) continue;
    const command = commandLine(pid);
    // A recycled pid: /proc says the process is something else than an agent for this pool.
    if (command !== undefined && !command.includes(pool)) continue;
    holders.push({ nodeId, pool, pid, command });
  }
  return holders;
}

export function describeHolder(holder: PoolHolder): string {
  const what = holder.command ? ` (${holder.command})` : '';
  return `${holder.nodeId}: pool ${holder.pool} is in use by process ${holder.pid}${what}`;
}

/** SIGTERM, then SIGKILL after graceMs; for processes that are not our children (no exit event). */
export async function stopProcess(pid: number, graceMs = 10_000): Promise<void> {
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(pid, name);
    } catch {
      // already gone
    }
  };
  signal('SIGTERM');
  const killAt = Date.now() + graceMs;
  while (isRunning(pid)) {
    if (Date.now() > killAt) signal('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function lockHolderOf(pool: string): number | undefined {
  try {
    return lockHolder(fs.readFileSync(new PoolLayout(pool).lockFile, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Alive and not a zombie: an exited process nobody has reaped yet still answers kill(pid, 0). */
function isRunning(pid: number): boolean {
  if (!isProcessAlive(pid)) return false;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return process.platform !== 'linux';
  }
}

function commandLine(pid: number): string | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return text.split('\0').filter(Boolean).join(' ') || undefined;
  } catch {
    return undefined;
  }
}
