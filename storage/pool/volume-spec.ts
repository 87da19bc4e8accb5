/** Validation of what callers ask for and of what is read back from disk. */
import { DriverError, FailureType } from '../../common/failures';
import type { CreateVolumeSpec } from './backend';
import { assertVolumeKey } from './pool-layout';

export function isSize(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

export function isStringMap(value: unknown): value is Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  return Object.values(value).every((entry) => typeof entry === 'string');
}

export function sameParameters(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && a[key] === b[key]);
}

/** Throws InvalidArgument; runs before anything touches the filesystem. */
export function assertCreateVolumeSpec(spec: unknown): asserts spec is CreateVolumeSpec {
  if (typeof spec !== 'object' || spec === null) {
    throw new DriverError(FailureType.InvalidArgument, 'a volume spec is required');
  }
  const { key, name, capacityBytes, parameters } = spec as Partial<Record<keyof CreateVolumeSpec, unknown>>;
  assertVolumeKey(key);
  if (typeof name !== 'string' || name === '') {
    throw new DriverError(FailureType.InvalidArgument, 'volume name must be a non-empty string');
  }
  if (!isSize(capacityBytes)) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `capacity ${String(capacityBytes)} is not a whole number of bytes >= 0`,
    );
  }
  if (!isStringMap(parameters)) {
    throw new DriverError(FailureType.InvalidArgument, 'volume parameters must map strings to strings');
  }
}
