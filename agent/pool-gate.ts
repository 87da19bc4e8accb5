import { DriverError, FailureType } from '../common/failures';
import { poolIdPrefix } from '../common/names';
import { DirBackend } from '../storage/dir/dir-backend';
import type { StorageBackend } from '../storage/pool/backend';
import type { NewIdentity, PoolIdentity } from '../storage/pool/pool-layout';

/**
 * Whether the agent may open its pool and run storage work on it. After a reboot the pool's disk may not be
 * mounted yet: the directory is empty (deploy/ makes it with DirectoryOrCreate), and a new identity there would
 * answer every waiting deletion of the real pool's volumes with "pool replaced" and put new volumes on the root
 * filesystem. So a pool identity other than the one the node's record remembers is never made or served on the
 * agent's own: the operator decides, by naming the identity that is gone (`--accept-new-pool`). docs/operations.md.
 */
export interface PoolGateInput {
  nodeId: string;
  /** The pool directory. */
  pool: string;
  /** The pool's identity on disk; undefined when it has none. */
  onDisk?: PoolIdentity;
  /** The pool identity the node's record remembers; undefined when there is no record or it never heard a report. */
  remembered?: string;
  /**
   * The newest pool prefix the node's volume and snapshot operations name (their volume and snapshot IDs carry it),
   * read only when the record remembers none and the directory has no identity: a record lost while the disk was
   * not mounted.
   */
  named?: string;
  /** `--accept-new-pool`: the identity the operator says is gone for good. */
  accepted?: string;
  /** How often the agent looks again, for the message. */
  recheckSeconds: number;
  /** Why the pool's filesystem is not one the backend may run on ({@link filesystemRefusal}); undefined when it is. */
  unfit?: string;
}

/** How often a refused pool is looked at again (a disk mounted meanwhile is then opened). */
export const POOL_RECHECK_MS = 10_000;

export type PoolGate = { kind: 'open'; fresh: NewIdentity; note?: string } | { kind: 'refuse'; message: string };

/** Same pool: the full identity or the 16 hex digits a volume ID carries. */
export function samePool(a: string, b: string): boolean {
  return poolIdPrefix(a.toLowerCase()) === poolIdPrefix(b.toLowerCase());
}

export function decidePool(input: PoolGateInput): PoolGate {
  const { onDisk, accepted } = input;
  if (input.unfit !== undefined) return { kind: 'refuse', message: input.unfit };
  const known = knownPool(input);
  // First start (or a record that never heard a report, with nothing else naming a pool): nothing to confuse.
  if (!known) return { kind: 'open', fresh: {} };
  if (onDisk && samePool(onDisk.poolId, known.poolId)) return { kind: 'open', fresh: {} };
  // The replacement was decided when this pool was made; the record has not heard of it yet.
  if (onDisk?.replaces && samePool(onDisk.replaces, known.poolId)) return { kind: 'open', fresh: {} };
  if (accepted && samePool(accepted, known.poolId)) {
    const note = onDisk
      ? `pool ${onDisk.poolId} replaces pool ${known.poolId} (--accept-new-pool)`
      : `a new pool replaces pool ${known.poolId} (--accept-new-pool)`;
    return { kind: 'open', fresh: { replaces: known.poolId }, note };
  }
  return { kind: 'refuse', message: refusal(input, known) };
}

interface KnownPool {
  poolId: string;
  /** Who knows it, for the message. */
  knownBy: string;
}

function knownPool(input: PoolGateInput): KnownPool | undefined {
  const { nodeId, remembered, named, onDisk } = input;
  if (remembered !== undefined)
    return { poolId: remembered, knownBy: `the record of node ${nodeId} remembers pool ${remembered}` };
  // A pool on disk with a lost record is the node's pool; an empty directory may be a disk not mounted yet.
  if (onDisk || named === undefined) return undefined;
  return {
    poolId: named,
    knownBy: `volume or snapshot operations of node ${nodeId} name pool ${named} (its record remembers none)`,
  };
}

function refusal(input: PoolGateInput, known: KnownPool): string {
  const { nodeId, pool, onDisk, accepted } = input;
  const { poolId } = known;
  const found = onDisk ? `holds pool ${onDisk.poolId}` : 'has no pool identity (an empty directory)';
  const serve = onDisk ? `serve pool ${onDisk.poolId} instead` : 'make a new pool there';
  return (
    `pool ${pool} ${found}, but ${known.knownBy}; ` +
    `this agent runs no storage work on node ${nodeId} until that is settled. ` +
    `If the disk holding pool ${poolId} is not mounted at ${pool} yet, mount it there: ` +
    `the agent looks again every ${input.recheckSeconds} s. ` +
    `If pool ${poolId} is gone for good (wiped or replaced), restart the agent with ` +
    `--accept-new-pool=${poolId} to ${serve}: deletions waiting for its volumes then answer that their pool ` +
    `was replaced.` +
    (accepted ? ` (--accept-new-pool names ${accepted}, which is not pool ${poolId}.)` : '')
  );
}

/**
 * The first part of the gate, which needs no Temporal: is the filesystem holding the pool one the backend may run
 * on? A dir backend with --dir-quota=project needs project quotas enforced there (storage/dir/dir-backend.ts). After a
 * reboot the pool's disk may be mounted late: until then the pool directory is on the root filesystem, which
 * usually does not enforce them. The agent then serves kubelet (its calls on the pool answer UNAVAILABLE with this
 * reason), stays not ready, and looks again every `recheckSeconds`; it never crash-loops. Undefined when fit.
 */
export async function filesystemRefusal(backend: StorageBackend, recheckSeconds: number): Promise<string | undefined> {
  if (!(backend instanceof DirBackend)) return undefined;
  try {
    await backend.checkQuotas();
    return undefined;
  } catch (error) {
    if (!(error instanceof DriverError) || error.type !== FailureType.FailedPrecondition) throw error;
    return (
      `${error.message} This agent serves kubelet but runs no storage work until then; if the pool's disk is not ` +
      `mounted yet, mount it: the agent looks again every ${recheckSeconds} s.`
    );
  }
}
