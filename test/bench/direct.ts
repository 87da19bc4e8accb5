import { randomBytes } from 'node:crypto';
import type { DirBackend } from '../../storage/dir/dir-backend';
import { MiB } from '../support/csi-requests';
import { leftoversIn, measure } from './measure';
import type { LevelResult } from './report';

export interface DirectTarget {
  backend: DirBackend;
  pool: string;
}

async function createOne(target: DirectTarget, name: string): Promise<string> {
  const key = randomBytes(16).toString('hex');
  const record = await target.backend.createVolume({ key, name, capacityBytes: MiB, parameters: {} });
  return record.key;
}

export async function warmUpDirect(target: DirectTarget, runId: string, count: number): Promise<void> {
  for (let index = 0; index < count; index++) {
    await target.backend.deleteVolume(await createOne(target, `direct-${runId}-warmup-${index}`));
  }
}

/** The same calls on a DirBackend in this process: the storage work alone, without Temporal or gRPC. */
export async function runDirectLevel(
  target: DirectTarget,
  runId: string,
  concurrency: number,
  ops: number,
): Promise<LevelResult> {
  const names = Array.from({ length: ops }, (_, index) => `direct-${runId}-c${concurrency}-${index}`);
  const created = await measure(names, concurrency, (name) => createOne(target, name));
  const keys = created.values.filter((key): key is string => key !== undefined);
  const deleted = await measure(keys, concurrency, async (key) => {
    const { existed } = await target.backend.deleteVolume(key);
    if (!existed) throw new Error(`volume ${key} was already gone`);
  });
  return { concurrency, create: created.result, delete: deleted.result, leftovers: leftoversIn(target.pool) };
}
