import path from 'node:path';
import { DriverError, FailureType } from '../common/failures';
import type { StorageBackend } from '../storage/backend';
import { DirBackend } from '../storage/dir-backend';
import { LoopBackend } from '../storage/loop-backend';

export interface BackendConfig {
  kind: string;
  pool: string;
  capacityBytes: number;
}

export function createBackend(config: BackendConfig): StorageBackend {
  const pool = path.resolve(config.pool);
  switch (config.kind) {
    case 'dir':
      return new DirBackend({ pool, capacityBytes: config.capacityBytes });
    case 'loop':
      return new LoopBackend({ pool, capacityBytes: config.capacityBytes });
    default:
      throw new DriverError(FailureType.InvalidArgument, `backend "${config.kind}" is not supported (use dir or loop)`);
  }
}
