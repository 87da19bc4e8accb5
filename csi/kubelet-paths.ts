/**
 * The staging and target paths kubelet sends must lie inside its own directory (`--kubelet-dir`): the Node
 * service mounts volumes there as root, so a path elsewhere (or one that reaches elsewhere through `..` or a
 * symbolic link) would let whoever can call it mount over any host directory. Checked before any side effect.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../common/failures';
import { errorCode } from '../storage/host/files';

export async function assertInKubeletDir(value: string, field: string, kubeletDir: string): Promise<void> {
  const root = await realDir(kubeletDir);
  const real = await resolveExisting(path.resolve(value));
  if (real === root || !real.startsWith(root === '/' ? '/' : `${root}/`)) {
    const via = real === path.resolve(value) ? '' : ` (it resolves to ${real})`;
    throw new DriverError(
      FailureType.InvalidArgument,
      `${field} ${value} is outside the kubelet directory ${kubeletDir}${via}: the node agent stages and ` +
        'publishes only below --kubelet-dir',
    );
  }
}

async function realDir(dir: string): Promise<string> {
  try {
    return await fs.realpath(dir);
  } catch (error) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `the kubelet directory ${dir} cannot be resolved (${errorCode(error) ?? String(error)}): check --kubelet-dir`,
    );
  }
}

/** The path with every symbolic link of its existing part resolved; the part that does not exist yet kept as is. */
async function resolveExisting(absolute: string): Promise<string> {
  const missing: string[] = [];
  let existing = absolute;
  for (;;) {
    try {
      return path.join(await fs.realpath(existing), ...missing);
    } catch (error) {
      if (errorCode(error) !== 'ENOENT' || existing === '/') throw error;
      // A link to nothing would be followed by mkdir or mount later, to wherever it points by then.
      if (await isDanglingLink(existing)) {
        throw new DriverError(FailureType.InvalidArgument, `${existing} is a symbolic link to nothing`);
      }
      missing.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
  }
}

async function isDanglingLink(target: string): Promise<boolean> {
  try {
    return (await fs.lstat(target)).isSymbolicLink();
  } catch {
    return false;
  }
}
