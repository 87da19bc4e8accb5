import path from 'node:path';
import type { CopyBudget } from '../common/copy-budget';
import { DriverError, FailureType } from '../common/failures';
import type { Logger } from '../common/logger';
import type { StorageBackend } from '../storage/pool/backend';
import { DirBackend } from '../storage/dir/dir-backend';
import type { DirQuotaMode } from '../storage/dir/dir-backend';
import { LoopBackend } from '../storage/loop/loop-backend';

export interface BackendConfig {
  kind: string;
  pool: string;
  capacityBytes: number;
  /** `--dir-quota` (dir only; the loop backend's images are their own limit). */
  dirQuota: DirQuotaMode;
  /** `--copy-min-time` and `--copy-rate`: how long each snapshot, restore or clone copy may take. */
  copyBudget?: CopyBudget;
}

export function createBackend(config: BackendConfig): StorageBackend {
  const pool = path.resolve(config.pool);
  const { capacityBytes, copyBudget } = config;
  switch (config.kind) {
    case 'dir':
      return new DirBackend({ pool, capacityBytes, copyBudget, quota: config.dirQuota });
    case 'loop':
      return new LoopBackend({ pool, capacityBytes, copyBudget });
    default:
      throw new DriverError(FailureType.InvalidArgument, `backend "${config.kind}" is not supported (use dir or loop)`);
  }
}

/**
 * The backend. With --dir-quota=project its filesystem is checked by the pool gate (agent/pool-gate.ts), not here:
 * a disk mounted late must not make the agent crash-loop. With `none` the agent says that sizes are not enforced.
 */
export function prepareBackend(config: BackendConfig, logger: Logger): StorageBackend {
  const backend = createBackend(config);
  if (backend instanceof DirBackend && config.dirQuota === 'none')
    logger.warn(
      { pool: config.pool },
      '--dir-quota=none: dir volume sizes are reserved, not enforced; a volume can fill the pool filesystem (development only)',
    );
  return backend;
}
