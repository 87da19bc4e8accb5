/** <pool>/pool.json: the pool's UUID, written once so that a re-created pool is never mistaken for the old one. */
import { randomUUID } from 'node:crypto';
import { DriverError, FailureType } from '../../common/failures';
import { readJson, writeJsonOnce } from '../host/files';
import type { PoolLayout } from './pool-layout';

export interface PoolIdentity {
  poolId: string;
  /** ISO 8601. */
  createdAt: string;
  /** The backend kind that created the pool; another kind must not open it. */
  backend: string;
  /** The identity this pool replaced, when an operator accepted the replacement (agent/pool-gate.ts). */
  replaces?: string;
}

/** What to write when the pool has no identity yet. */
export interface NewIdentity {
  /** The identity the node's record remembered, named by the operator's decision; absent on a first start. */
  replaces?: string;
}

/**
 * Writes the identity if there is none (created: true), then checks it belongs to `backend`. A pool that has one
 * keeps it whatever `fresh` says: the file is written once, so a disk mounted in the meantime wins.
 */
export async function ensurePoolIdentity(
  layout: PoolLayout,
  backend: string,
  fresh: NewIdentity = {},
): Promise<{ identity: PoolIdentity; created: boolean }> {
  const made: PoolIdentity = { poolId: randomUUID(), createdAt: new Date().toISOString(), backend };
  if (fresh.replaces) made.replaces = fresh.replaces;
  const created = await writeJsonOnce(layout.identityFile, made);
  const identity = created ? made : await readIdentity(layout);
  if (!identity) throw new DriverError(FailureType.Internal, `${layout.identityFile} vanished while it was opened`);
  if (identity.backend !== backend) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `pool ${layout.root} belongs to the ${identity.backend} backend, not ${backend}`,
    );
  }
  return { identity, created };
}

/** The pool's identity; undefined when it has none yet (an empty directory, or a disk not mounted there). */
export async function readIdentity(layout: PoolLayout): Promise<PoolIdentity | undefined> {
  const file = layout.identityFile;
  const value = await readJson(file).catch((error: unknown) => {
    if (error instanceof DriverError) return null;
    throw error;
  });
  if (value === undefined) return undefined;
  const identity = (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
  const { poolId, createdAt, backend, replaces } = identity;
  if (typeof poolId !== 'string' || poolId === '' || typeof createdAt !== 'string' || typeof backend !== 'string') {
    throw new DriverError(FailureType.FailedPrecondition, `${file} is not a durable-csi pool identity`);
  }
  return { poolId, createdAt, backend, ...(typeof replaces === 'string' ? { replaces } : {}) };
}
