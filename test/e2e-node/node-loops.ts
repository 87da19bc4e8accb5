import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface LoopDevice {
  name: string;
  'back-file': string;
  /**
   * The backing file's "major:minor/inode": what stays true of an attached device when its path, as losetup shows
   * it, changes (the mount it was read through gone with the node's namespace).
   */
  backing: string;
  /** Attached by kubelet over one of the pool's devices (a raw block volume mapped into a Pod), not by the agent. */
  kubelet: boolean;
}

interface Listed {
  name: string;
  'back-file': string | null;
  'back-ino': string | number;
  'back-maj:min': string;
}

/**
 * Loop devices whose backing file lies in the node's pool (or under its run directory), then those kubelet
 * attached over such a device (it holds a raw block volume's device that way while a Pod maps it): kubelet's
 * first, so detaching in this order frees both. Loop devices are the machine's, not the namespace's, and the
 * agent attaches inside its container, so the path losetup shows is the container's: devices are matched by the
 * backing file's device and inode.
 */
export function poolLoopDevices(run: string, poolDir: string): LoopDevice[] {
  const out = execFileSync('losetup', ['--json', '--list', '--output', 'NAME,BACK-FILE,BACK-INO,BACK-MAJ:MIN'], {
    encoding: 'utf8',
  });
  const listed = (out.trim() ? JSON.parse(out) : { loopdevices: [] }) as { loopdevices: Listed[] };
  const backing = (device: Listed) => `${device['back-maj:min'].trim()}/${String(device['back-ino'])}`;
  const inPool = poolFiles(poolDir);
  const ours = listed.loopdevices.filter(
    (device) => (device['back-file'] ?? '').includes(run) || inPool.has(backing(device)),
  );
  const ourNodes = new Set(ours.flatMap((device) => fileId(device.name) ?? []));
  const kubelets = listed.loopdevices.filter((device) => ourNodes.has(backing(device)));
  const described = (kubelet: boolean) => (device: Listed) => ({
    name: device.name,
    'back-file': device['back-file'] ?? '',
    backing: backing(device),
    kubelet,
  });
  return [...kubelets.map(described(true)), ...ours.map(described(false))];
}

/** "major:minor/inode" of every file in the pool's volume directories. */
function poolFiles(poolDir: string): Set<string> {
  const volumes = path.join(poolDir, 'volumes');
  if (!fs.existsSync(volumes)) return new Set();
  return new Set(
    fs
      .readdirSync(volumes, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .flatMap((entry) => fileId(path.join(entry.parentPath, entry.name)) ?? []),
  );
}

/** "major:minor/inode" of a file, as losetup shows a backing file (Linux dev_t: major in bits 8-19). */
function fileId(file: string): string | undefined {
  try {
    const { dev, ino } = fs.statSync(file);
    return `${(dev >> 8) & 0xfff}:${(dev & 0xff) | ((dev >> 12) & 0xfff00)}/${ino}`;
  } catch {
    return undefined;
  }
}
