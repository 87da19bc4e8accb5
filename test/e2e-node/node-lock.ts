import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** One real node at a time on a machine: the namespace's addresses are fixed, kubelet's cgroups are host-wide. */
const LOCK = path.join(os.tmpdir(), 'durable-csi-real-node.lock');

/**
 * Takes the machine's real-node lock, or throws naming the process that holds it (two jest workers each starting
 * a node break both, in ways that are hard to read). A lock whose process is gone is taken over.
 */
export function lockRealNode(): void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(LOCK, String(process.pid), { flag: 'wx' });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = Number(fs.readFileSync(LOCK, 'utf8'));
    if (holder > 0 && alive(holder))
      throw new Error(
        `a real node runs already on this machine (process ${holder}, ${LOCK}): ` +
          'run the test/e2e-node files one at a time (jest --runInBand)',
      );
    fs.rmSync(LOCK, { force: true });
  }
  throw new Error(`could not take ${LOCK}`);
}

export function unlockRealNode(): void {
  try {
    if (Number(fs.readFileSync(LOCK, 'utf8')) === process.pid) fs.rmSync(LOCK);
  } catch {
    // not held
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
