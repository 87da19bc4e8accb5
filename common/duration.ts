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

/** A duration as an operator reads it: 42s, 3m7s, 2h5m. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${seconds % 60}s`;
  const hours = Math.floor(minutes / 60);
  return `${hours}h${minutes % 60}m`;
}
