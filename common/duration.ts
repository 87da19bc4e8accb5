import { DriverError, FailureType } from './failures';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses "500ms", "8s", "10m", "1h" into milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text.trim());
  const unit = match ? UNIT_MS[match[2] ?? ''] : undefined;
  if (!match || unit === undefined) {
    throw new DriverError(FailureType.InvalidArgument, `"${text}" is not a duration; use e.g. 500ms, 8s, 10m or 1h`);
  }
  return Math.round(Number(match[1]) * unit);
}
