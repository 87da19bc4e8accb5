import type { CreateSnapshotSpec, CreateVolumeSpec, MoveFence, StorageBackend } from '../storage/pool/backend';
import type { TransferSource } from '../storage/pool/transfer';

/**
 * Failpoints for the crash tests and the chaos harness: the hidden flag `--failpoints name[,name]` makes the node
 * agent kill itself (SIGKILL, no cleanup) at that step, exactly as a power cut would, or (snapshot.slow-copy) take
 * SLOW_COPY_MS longer over every snapshot copy, as a large one would. Off unless the flag is
 * given; the agent logs a warning when any is armed. Only a flag: no environment variable (a ConfigMap's, say)
 * can arm them in a deployed Pod (docs/security.md). Names:
 *   create.before-allocate  create.after-allocate  delete.before  delete.after
 *   snapshot.after-copy (the copy and its record are made, the activity never answers)  snapshot.slow-copy
 *   move.pull-half (a move's pull checkpoints after every chunk and the agent dies once half the chunks are in)
 *   move.after-hold (the source's hold on a moved volume is written, the activity never answers)
 *   move.after-adopt (the target's volume, or snapshot, is made from the copy, its staging not yet removed)
 *   move.after-offer (the source's offer is written, its token sealed, the activity never answers)
 *   move.after-withdraw (the source's offer is withdrawn at the move's release, the activity never answers)
 * A move's retire deletes the old volume as every delete does: delete.before and delete.after reach it.
 */
export const FAILPOINT_NAMES = [
  'create.before-allocate',
  'create.after-allocate',
  'delete.before',
  'delete.after',
  'snapshot.after-copy',
  'snapshot.slow-copy',
  'move.pull-half',
  'move.after-hold',
  'move.after-adopt',
  'move.after-offer',
  'move.after-withdraw',
] as const;
export type Failpoint = (typeof FAILPOINT_NAMES)[number];

export const SLOW_COPY_MS = 10_000;

export function armedFailpoints(spec = ''): Set<Failpoint> {
  const names = spec.split(',').filter(Boolean);
  const unknown = names.filter((name) => !(FAILPOINT_NAMES as readonly string[]).includes(name));
  if (unknown.length > 0)
    throw new Error(`unknown failpoint(s) ${unknown.join(', ')}; known: ${FAILPOINT_NAMES.join(', ')}`);
  return new Set(names as Failpoint[]);
}

/**
 * move.pull-half, for the pull (activities/node-activities.ts): what the pull's options become (a checkpoint after
 * every chunk, so the kill lands between two) and the check after each checkpoint. Undefined when not armed.
 */
export function pullFailpoint(
  armed: Set<Failpoint> | undefined,
): { checkpointEveryMs: number; onCheckpoint(chunks: number, chunkCount: number): void } | undefined {
  if (!armed?.has('move.pull-half')) return undefined;
  return {
    checkpointEveryMs: 0,
    onCheckpoint: (chunks, chunkCount) => {
      if (chunks >= chunkCount / 2 && chunks < chunkCount) process.kill(process.pid, 'SIGKILL');
    },
  };
}

/**
 * Wraps the agent's TransferSource so move.after-offer and move.after-withdraw kill the process once its offer is
 * written or withdrawn. The source itself when neither is armed.
 */
export function withTransferFailpoints(source: TransferSource, armed: Set<Failpoint> | undefined): TransferSource {
  if (!armed?.has('move.after-offer') && !armed?.has('move.after-withdraw')) return source;
  const hit = killer(armed);
  const wrapped: Partial<TransferSource> = {
    async offer(...args: Parameters<TransferSource['offer']>) {
      const offer = await source.offer(...args);
      hit('move.after-offer');
      return offer;
    },
    async withdraw(moveKey: string) {
      const withdrawn = await source.withdraw(moveKey);
      hit('move.after-withdraw');
      return withdrawn;
    },
  };
  return boundProxy(source, wrapped);
}

/** Wraps a backend so armed failpoints kill the process around its create and delete steps. */
export function withFailpoints(backend: StorageBackend, armed: Set<Failpoint>): StorageBackend {
  if (armed.size === 0) return backend;
  const hit = killer(armed);
  const wrapped: Partial<StorageBackend> = {
    async createVolume(spec: CreateVolumeSpec) {
      hit('create.before-allocate');
      const record = await backend.createVolume(spec);
      hit('create.after-allocate');
      if (spec.contentSource && 'moveKey' in spec.contentSource) hit('move.after-adopt');
      return record;
    },
    async fenceVolume(key: string, fence: MoveFence, replacing?: string) {
      await backend.fenceVolume(key, fence, replacing);
      hit('move.after-hold');
    },
    async createSnapshot(spec: CreateSnapshotSpec) {
      if (armed.has('snapshot.slow-copy')) await new Promise((resolve) => setTimeout(resolve, SLOW_COPY_MS));
      const record = await backend.createSnapshot(spec);
      hit('snapshot.after-copy');
      if (spec.moved) hit('move.after-adopt');
      return record;
    },
    async deleteVolume(key: string) {
      hit('delete.before');
      const result = await backend.deleteVolume(key);
      hit('delete.after');
      return result;
    },
  };
  return boundProxy(backend, wrapped);
}

function killer(armed: Set<Failpoint>): (name: Failpoint) => void {
  return (name) => {
    if (armed.has(name)) process.kill(process.pid, 'SIGKILL');
  };
}

/** `target` with `own`'s methods in place of its own; everything else goes to it, bound (its methods use private state). */
function boundProxy<T extends object>(target: T, own: Partial<T>): T {
  return new Proxy(target, {
    get(inner, property, receiver) {
      const replaced = own[property as keyof T];
      if (replaced) return replaced;
      const value: unknown = Reflect.get(inner, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(inner) : value;
    },
  });
}
