/**
 * The host side of `npm run bench:snapshots`: the checks that it can run at all (root, loop devices, the tools),
 * and the pool filesystems it makes for itself on loop devices (an XFS with reflink and an ext4), each a sparse
 * image in the run's temporary directory, mounted there, and unmounted and detached again at the end.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** Runs a tool; a failure names the command and what it printed. */
export async function run(command: string, args: string[], timeoutMs = 120_000): Promise<string> {
  try {
    const { stdout } = await execFileAsync(command, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const failed = error as { stderr?: string; message: string };
    throw new Error(`${command} ${args.join(' ')} failed: ${(failed.stderr ?? '').trim() || failed.message}`);
  }
}

const TOOLS = [
  'filefrag',
  'losetup',
  'mkfs.xfs',
  'mkfs.ext4',
  'mount',
  'umount',
  'cp',
  'fallocate',
  'fsfreeze',
  'sync',
  'dd',
];

function onPath(tool: string): boolean {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/sbin'];
  return dirs.some((dir) => {
    try {
      fs.accessSync(path.join(dir, tool), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Everything the benchmark needs of the host, each missing piece named; empty when it can run. */
export function missingRequirements(): string[] {
  const missing: string[] = [];
  if (process.platform !== 'linux') missing.push(`Linux (this is ${process.platform})`);
  if (process.getuid?.() !== 0) missing.push('root: it attaches loop devices and mounts filesystems (run it as root)');
  if (!fs.existsSync('/dev/loop-control')) missing.push('loop devices: /dev/loop-control is missing (modprobe loop)');
  for (const tool of TOOLS)
    if (!onPath(tool)) missing.push(`${tool} on PATH (util-linux, coreutils, xfsprogs, e2fsprogs)`);
  return missing;
}

export type PoolFsKind = 'xfs' | 'ext4';

export interface PoolFs {
  kind: PoolFsKind;
  /** The sparse image file backing the loop device. */
  image: string;
  device: string;
  mountPoint: string;
  /** The node agent's --pool: a directory inside the mount (ext4's root holds lost+found). */
  pool: string;
  /** Whether `cp --reflink=always` works on it: probed, not assumed from the mkfs flags. */
  reflink: boolean;
}

const MKFS: Record<PoolFsKind, (device: string) => [string, string[]]> = {
  xfs: (device) => ['mkfs.xfs', ['-q', '-f', '-m', 'reflink=1', device]],
  // The inode tables and journal are written now, not by ext4lazyinit in the background during the rounds.
  ext4: (device) => ['mkfs.ext4', ['-q', '-F', '-E', 'lazy_itable_init=0,lazy_journal_init=0', device]],
};

/**
 * Makes a pool filesystem of `bytes` in `dir`: a sparse image, attached with `losetup -f --show`, formatted,
 * mounted. Each step pushes its undoing onto `cleanups` as soon as it is done, so a failure half-way leaves nothing.
 */
export async function makePoolFs(
  dir: string,
  kind: PoolFsKind,
  bytes: number,
  cleanups: (() => Promise<void>)[],
): Promise<PoolFs> {
  const image = path.join(dir, `${kind}.img`);
  const handle = fs.openSync(image, 'w');
  try {
    fs.ftruncateSync(handle, bytes);
  } finally {
    fs.closeSync(handle);
  }
  const device = (await run('losetup', ['-f', '--show', image])).trim();
  if (!device.startsWith('/dev/loop')) throw new Error(`losetup -f --show ${image} printed "${device}"`);
  cleanups.push(() => detach(device));
  const [mkfs, args] = MKFS[kind](device);
  await run(mkfs, args, 300_000);
  const mountPoint = path.join(dir, `mnt-${kind}`);
  fs.mkdirSync(mountPoint);
  await run('mount', [device, mountPoint]);
  cleanups.push(() => unmount(mountPoint));
  const pool = path.join(mountPoint, 'pool');
  fs.mkdirSync(pool);
  return { kind, image, device, mountPoint, pool, reflink: await reflinks(mountPoint) };
}

async function reflinks(mountPoint: string): Promise<boolean> {
  const probe = path.join(mountPoint, 'reflink-probe');
  fs.writeFileSync(probe, Buffer.alloc(65536, 1));
  try {
    await run('cp', ['--reflink=always', probe, `${probe}.copy`]);
    return true;
  } catch {
    return false;
  } finally {
    fs.rmSync(probe, { force: true });
    fs.rmSync(`${probe}.copy`, { force: true });
  }
}

/** Loop devices whose backing file lies under `dir` (a volume image the agent left attached). */
async function devicesBackedUnder(dir: string): Promise<string[]> {
  const listing = await run('losetup', ['--list', '--noheadings', '--raw', '--output', 'NAME,BACK-FILE']);
  return listing
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter(([name, file]) => name && file?.startsWith(`${dir}${path.sep}`))
    .map(([name]) => name as string);
}

async function unmount(mountPoint: string): Promise<void> {
  for (const device of await devicesBackedUnder(mountPoint)) await detach(device);
  for (let attempt = 1; ; attempt++) {
    try {
      await run('umount', [mountPoint]);
      return;
    } catch (error) {
      if (attempt >= 5) {
        // Busy for good: detach it from the tree so the loop device can go, and say so.
        await run('umount', ['--lazy', mountPoint]);
        throw new Error(`${mountPoint} stayed busy; unmounted lazily: ${String(error)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

async function detach(device: string): Promise<void> {
  await run('losetup', ['--detach', device]);
}

/** Bytes in use on the filesystem holding `dir` (what reflink sharing saves shows here, not in a file's blocks). */
export function usedBytes(dir: string): number {
  const stats = fs.statfsSync(dir);
  return (stats.blocks - stats.bfree) * stats.bsize;
}

/** Bytes a file's blocks take (st_blocks x 512): shared extents count in full, as du shows them. */
export function blockBytes(file: string): number {
  return fs.statSync(file).blocks * 512;
}

/**
 * Bytes of a file in extents it shares with another file (reflinks), from `filefrag -v`'s `shared` flags: what du
 * cannot show, since a shared extent counts in full in every file's blocks.
 */
export async function sharedBytes(file: string): Promise<number> {
  const output = await run('filefrag', ['-v', file]);
  const blockSize = Number(/blocks of (\d+) bytes/.exec(output)?.[1]);
  if (!Number.isFinite(blockSize)) throw new Error(`filefrag -v ${file}: no block size in ${output}`);
  let blocks = 0;
  for (const line of output.split('\n')) {
    // "   0:        0..  262143:      24..    262167: 262144:             last,shared,eof"
    const extent = /^\s*\d+:\s+\d+\.\.\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+):.*\bshared\b/.exec(line);
    if (extent) blocks += Number(extent[1]);
  }
  return blocks * blockSize;
}

/**
 * Drops the page cache of a file (posix_fadvise DONTNEED through dd), so that a copy reads it from the disk and
 * not from memory. Only clean pages go: sync before.
 */
export async function dropCache(file: string): Promise<void> {
  await run('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
}
