/**
 * The parts of a CreateVolume request that decide whether a later request for the same name is compatible (CSI:
 * same name, different size or parameters is ALREADY_EXISTS). Kept in the create's start memo and in its result.
 */
export interface CreateRequestShape {
  capacityBytes: number;
  parameters: Record<string, string>;
  accessType?: string;
  fsType?: string;
  /** Restore or clone: the source's ID. Absent for an empty volume (and in memos of earlier releases). */
  contentSource?: { snapshotId: string } | { volumeId: string };
}

export function requestShape(input: CreateRequestShape): CreateRequestShape {
  const { capacityBytes, parameters, accessType, fsType, contentSource } = input;
  return { capacityBytes, parameters, accessType, fsType, ...(contentSource ? { contentSource } : {}) };
}

export interface CapacityRange {
  requiredBytes: number;
  /** 0: no limit. */
  limitBytes: number;
}

/** Why `earlier` does not satisfy the new request, or undefined when it does. */
export function incompatibility(
  earlier: CreateRequestShape,
  wanted: CreateRequestShape,
  range: CapacityRange,
): string | undefined {
  const sizeFits =
    earlier.capacityBytes >= range.requiredBytes &&
    (range.limitBytes === 0 || earlier.capacityBytes <= range.limitBytes);
  if (!sizeFits) return `a size of ${earlier.capacityBytes} bytes`;
  if (JSON.stringify(sortKeys(earlier.parameters)) !== JSON.stringify(sortKeys(wanted.parameters)))
    return 'different parameters';
  if ((earlier.accessType ?? 'mount') !== (wanted.accessType ?? 'mount') || earlier.fsType !== wanted.fsType)
    return `another access type or filesystem (${earlier.accessType ?? 'mount'} ${earlier.fsType ?? ''})`;
  const source = (shape: CreateRequestShape) => JSON.stringify(shape.contentSource ?? null);
  if (source(earlier) !== source(wanted)) return `another content source (${source(earlier)})`;
  return undefined;
}

function sortKeys(record: Record<string, string>): [string, string][] {
  return Object.entries(record).sort(([a], [b]) => a.localeCompare(b));
}
