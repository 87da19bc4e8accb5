import fs from 'node:fs';
import path from 'node:path';

const CGROUP_ROOT = '/sys/fs/cgroup';

/** kubelet's cgroup tree (cgroupfs driver) in every hierarchy: host-wide, so the test removes it afterwards. */
export function kubepodsCgroups(): string[] {
  if (!fs.existsSync(CGROUP_ROOT)) return [];
  const found: string[] = [];
  for (const hierarchy of fs.readdirSync(CGROUP_ROOT)) {
    const dir = path.join(CGROUP_ROOT, hierarchy, 'kubepods');
    if (fs.existsSync(dir)) found.push(dir);
  }
  return found;
}

/** Every process in kubelet's cgroups: the Pods' containers (their shims are gone, they are not). */
export function processesInKubepods(): number[] {
  const pids = new Set<number>();
  const walk = (dir: string) => {
    try {
      for (const line of fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n'))
        if (line.trim()) pids.add(Number(line));
      for (const entry of fs.readdirSync(dir, { withFileTypes: true }))
        if (entry.isDirectory()) walk(path.join(dir, entry.name));
    } catch {
      // removed meanwhile
    }
  };
  for (const dir of kubepodsCgroups()) walk(dir);
  return [...pids];
}

/** Removes kubelet's cgroup tree, deepest first (a cgroup goes only once empty). */
export function removeKubepodsCgroups(): void {
  const remove = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }))
      if (entry.isDirectory()) remove(path.join(dir, entry.name));
    fs.rmdirSync(dir);
  };
  for (const dir of kubepodsCgroups()) remove(dir);
}
