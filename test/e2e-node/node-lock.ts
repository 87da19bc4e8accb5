import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Real-node runs at once on a machine. Each is isolated (its control plane's and nodes' network, mount and PID
 * namespaces, a cgroup root of its own, its run directory, loop devices by inode), so what bounds them is the
 * machine: `npm test` runs two lanes side by side (the single node's phases, the three-node cluster's), each
 * mostly waiting. DURABLE_CSI_REAL_NODE_SLOTS changes it.
 */
const SLOTS = Math.max(1, Number(process.env.DURABLE_CSI_REAL_NODE_SLOTS ?? 2) || 1);
/** Slot 0 keeps the lock's old name, so that an older checkout's run on the same machine still sees this one. */
const lockFile = (slot: number) =>
  path.join(os.tmpdir(), slot === 0 ? 'durable-csi-real-node.lock' : `durable-csi-real-node.${slot}.lock`);
let held: string | undefined;

/**
 * Takes a free real-node slot, or throws naming the processes that hold them all (two jest workers each starting
 * nodes beyond the machine's slots would slow each other past their timeouts). A slot whose process is gone is taken
 * over.
 */
export function lockRealNode(): void {
  if (held) throw new Error(`this process holds a real-node slot already (${held}): one real-node run per process`);
  const holders: string[] = [];
  for (let slot = 0; slot < SLOTS; slot++) {
    const file = lockFile(slot);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
        held = file;
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const holder = Number(fs.readFileSync(file, 'utf8'));
      if (holder > 0 && alive(holder)) {
        holders.push(`process ${holder} (${file})`);
        break;
      }
      fs.rmSync(file, { force: true });
    }
  }
  throw new Error(
    `${SLOTS} real-node run(s) already on this machine: ${holders.join(', ')}; ` +
      'wait for one to end, or run the real-node files one at a time (jest --runInBand)',
  );
}

export function unlockRealNode(): void {
  if (!held) return;
  try {
    if (Number(fs.readFileSync(held, 'utf8')) === process.pid) fs.rmSync(held);
  } catch {
    // not held
  }
  held = undefined;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
