/** <pool>/pool.json: the pool's UUID, written once so that a re-created pool is never mistaken for the old one. */
import { randomUUID } from 'node:crypto';
import { DriverError, FailureType } from '../common/failures';
import { readJson, writeJsonOnce } from './atomic-file';
import type { PoolLayout } from './pool-layout';

export interface PoolIdentity {
  poolId: string;
  /** ISO 8601. */
  createdAt: string;
  /** The backend kind that created the pool; another kind must not open it. */
  backend: string;
}

/** Writes the identity if there is none (created: true), then checks it belongs to `backend`. */
export async function ensurePoolIdentity(
  layout: PoolLayout,
  backend: string,
): Promise<{ identity: PoolIdentity; created: boolean }> {
  const fresh: PoolIdentity = { poolId: randomUUID(), createdAt: new Date().toISOString(), backend };
  const created = await writeJsonOnce(layout.identityFile, fresh);
  const identity = created ? fresh : await readIdentity(layout);
  if (identity.backend !== backend) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `pool ${layout.root} belongs to the ${identity.backend} backend, not ${backend}`,
    );
  }
  return { identity, created };
}

async function readIdentity(layout: PoolLayout): Promise<PoolIdentity> {
  const file = layout.identityFile;
  const value = await readJson(file).catch((error: unknown) => {
    if (error instanceof DriverError) return undefined;
    throw error;
  });
  const identity = (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
  const { poolId, createdAt, backend } = identity;
  if (typeof poolId !== 'string' || poolId === '' || typeof createdAt !== 'string' || typeof backend !== 'string') {
    throw new DriverError(FailureType.FailedPrecondition, `${file} is not a durable-csi pool identity`);
  }
  return { poolId, createdAt, backend };
}
