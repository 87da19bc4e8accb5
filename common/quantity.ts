import { DriverError, FailureType } from './failures';

const UNITS: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
};

/** Parses a Kubernetes-style quantity ("10Gi", "500M", "1073741824") into bytes. */
export function parseQuantity(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(text.trim());
  const multiplier = match ? UNITS[match[2] ?? ''] : undefined;
  if (!match || multiplier === undefined) {
    throw new DriverError(FailureType.InvalidArgument, `"${text}" is not a size; use bytes or a suffix such as 10Gi`);
  }
  const bytes = Math.floor(Number(match[1]) * multiplier);
  if (!Number.isSafeInteger(bytes)) throw new DriverError(FailureType.InvalidArgument, `size "${text}" is too large`);
  return bytes;
}

/** Formats bytes for people: the largest binary unit that keeps at least one whole unit. */
export function formatBytes(bytes: number): string {
  const units = ['Ti', 'Gi', 'Mi', 'Ki'] as const;
  for (const unit of units) {
    const size = UNITS[unit] ?? 1;
    if (bytes >= size) {
      const value = bytes / size;
      return `${Number.isInteger(value) ? value : value.toFixed(1)}${unit}`;
    }
  }
  return `${bytes}B`;
}
