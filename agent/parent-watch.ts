import fs from 'node:fs';

/**
 * Calls onGone once when this process's parent dies (the dev stack under `npm run dev`: npm and its shell may
 * die of a signal without passing it on). Node's process.ppid is fixed at start, so the live parent is read
 * from /proc on Linux; elsewhere the original parent is probed.
 */
export function watchParent(onGone: () => void, intervalMs = 500): () => void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (parentIsAlive(parent)) return;
    clearInterval(timer);
    onGone();
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

function parentIsAlive(parent: number): boolean {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent;
  } catch {
    try {
      process.kill(parent, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
}
