/** Idempotency of create (what an existing volume must match) and the reservation, for every backend. */
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type { CreateVolumeSpec } from './backend';
import type { StoredRecord } from './records';
import { describeSource, sameParameters } from './records';

/** What a create records beyond the common fields (dir: nothing; loop: access type and filesystem). */
export type VolumeShape = Pick<StoredRecord, 'accessType' | 'fsType'>;

/**
 * Same key: name and size must match. Same name under another key: size and parameters must match. Either way
 * the shape (access type, filesystem) must match too.
 */
export function assertCompatible(existing: StoredRecord, spec: CreateVolumeSpec, shape: VolumeShape): StoredRecord {
  const sameKey = existing.key === spec.key;
  const differences: string[] = [];
  if (sameKey && existing.name !== spec.name) {
    differences.push(`name ("${existing.name}", requested "${spec.name}")`);
  }
  if (existing.capacityBytes !== spec.capacityBytes) {
    differences.push(
      `capacity (${describeSize(existing.capacityBytes)}, requested ${describeSize(spec.capacityBytes)})`,
    );
  }
  if (!sameKey && !sameParameters(existing.parameters, spec.parameters)) {
    differences.push(
      `parameters (${JSON.stringify(existing.parameters)}, requested ${JSON.stringify(spec.parameters)})`,
    );
  }
  for (const field of ['accessType', 'fsType'] as const) {
    if (existing[field] !== shape[field]) {
      differences.push(`${field} (${existing[field] ?? 'none'}, requested ${shape[field] ?? 'none'})`);
    }
  }
  const had = existing.contentSource ? describeSource(existing.contentSource) : 'none';
  const asked = spec.contentSource ? describeSource(spec.contentSource) : 'none';
  if (had !== asked) differences.push(`content source (${had}, requested ${asked})`);
  if (differences.length === 0) return existing;
  const subject = sameKey ? `volume key ${spec.key}` : `volume "${spec.name}" (key ${existing.key})`;
  throw new DriverError(
    FailureType.AlreadyExists,
    `${subject} already exists with a different ${differences.join(' and ')}`,
  );
}

/** Human units when they are exact: a rounded "1.0Gi" would hide the byte that differs. */
export function describeSize(bytes: number): string {
  const human = formatBytes(bytes);
  return human.includes('.') ? `${bytes} bytes` : human;
}
