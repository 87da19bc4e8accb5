/** Validation of what callers ask for and of what is read back from disk. */
import { DriverError, FailureType } from '../../common/failures';
import type { ContentSource, CreateVolumeSpec } from './backend';
import { assertSnapshotKey, assertVolumeKey, isVolumeKey } from './pool-layout';

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

/** Exactly one of the two keys, well formed. */
export function isContentSource(value: unknown): value is ContentSource {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  const source = value as Partial<Record<string, unknown>>;
  return keys.length === 1 && (isVolumeKey(source.snapshotKey) || isVolumeKey(source.volumeKey));
}

function assertContentSource(value: unknown): asserts value is ContentSource {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || Object.keys(value).length !== 1) {
    throw new DriverError(FailureType.InvalidArgument, 'a content source names exactly one snapshotKey or volumeKey');
  }
  const source = value as Partial<Record<string, unknown>>;
  if ('snapshotKey' in source) assertSnapshotKey(source.snapshotKey);
  else if ('volumeKey' in source) assertVolumeKey(source.volumeKey);
  else throw new DriverError(FailureType.InvalidArgument, 'a content source names a snapshotKey or a volumeKey');
}

/** Throws InvalidArgument; runs before anything touches the filesystem. */
export function assertCreateVolumeSpec(spec: unknown): asserts spec is CreateVolumeSpec {
  if (typeof spec !== 'object' || spec === null) {
    throw new DriverError(FailureType.InvalidArgument, 'a volume spec is required');
  }
  const { key, name, capacityBytes, parameters, contentSource } = spec as Partial<
    Record<keyof CreateVolumeSpec, unknown>
  >;
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
  if (contentSource === undefined) return;
  assertContentSource(contentSource);
  if ('volumeKey' in contentSource && contentSource.volumeKey === key) {
    throw new DriverError(FailureType.InvalidArgument, `volume ${key} cannot be cloned from itself`);
  }
}

/** For messages: "snapshot <key>" or "volume <key>". */
export function describeSource(source: ContentSource): string {
  return 'snapshotKey' in source ? `snapshot ${source.snapshotKey}` : `volume ${source.volumeKey}`;
}
