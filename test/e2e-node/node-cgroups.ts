import fs from 'node:fs';
import path from 'node:path';

const CGROUP_ROOT = '/sys/fs/cgroup';

/**
 * A node's own cgroup tree, the kubelet's `cgroupRoot` (its Pods under `<root>/kubepods`), in every hierarchy.
 * Cgroups are the machine's, not a namespace's: kubelets of one machine that shared the default root (/) would share
 * /kubepods and kill, resize and remove each other's Pods' cgroups. `root` is a cgroupfs path such as
 * /dcsi-node-Xy12/node-1.
 */
export function cgroupDirs(root: string): string[] {
  if (!fs.existsSync(CGROUP_ROOT)) return [];
  return fs
    .readdirSync(CGROUP_ROOT)
    .map((hierarchy) => path.join(CGROUP_ROOT, hierarchy, root))
    .filter((dir) => fs.existsSync(dir));
}

/**
 * Makes the root in every hierarchy (kubelet refuses a cgroupRoot missing from a subsystem it needs), with cpuset's
 * CPUs and memory nodes copied from the top (a v1 cpuset cgroup starts empty, and no task can join it then).
 */
export function createCgroupRoot(root: string): void {
  if (!fs.existsSync(CGROUP_ROOT)) throw new Error(`${CGROUP_ROOT} is missing: kubelet needs cgroups`);
  for (const hierarchy of fs.readdirSync(CGROUP_ROOT)) {
    const top = path.join(CGROUP_ROOT, hierarchy);
    if (!fs.statSync(top).isDirectory()) continue;
    let parent = top;
    for (const part of root.split('/').filter(Boolean)) {
      const dir = path.join(parent, part);
      fs.mkdirSync(dir, { recursive: true });
      for (const file of ['cpuset.cpus', 'cpuset.mems']) {
        const own = path.join(dir, file);
        if (fs.existsSync(own) && fs.readFileSync(own, 'utf8').trim() === '')
          fs.writeFileSync(own, fs.readFileSync(path.join(parent, file), 'utf8'));
      }
      parent = dir;
    }
  }
}

/** Every process in the node's cgroups: its Pods' containers (they outlive their shims). */
export function processesIn(root: string): number[] {
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
  for (const dir of cgroupDirs(root)) walk(dir);
  return [...pids];
}

/**
 * Removes the node's cgroup tree, deepest first (a cgroup goes only once empty), then its parents up to the top as
 * far as they are empty (another node of the same cluster may still use them).
 */
export function removeCgroupRoot(root: string): void {
  const remove = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }))
      if (entry.isDirectory()) remove(path.join(dir, entry.name));
    fs.rmdirSync(dir);
  };
  for (const dir of cgroupDirs(root)) remove(dir);
  const parts = root.split('/').filter(Boolean);
  for (let depth = parts.length - 1; depth > 0; depth--) {
    for (const dir of cgroupDirs(`/${parts.slice(0, depth).join('/')}`)) {
      try {
        fs.rmdirSync(dir);
      } catch {
        // not empty: another node's
      }
    }
  }
}

/** kubelet's default tree (cgroupRoot /): a real node of an older harness, or a leak of one. */
export function defaultKubepodsCgroups(): string[] {
  return cgroupDirs('/kubepods');
}
