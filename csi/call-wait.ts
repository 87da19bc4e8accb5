import type { ServerUnaryCall } from '@grpc/grpc-js';

/** Answer a second before the caller's deadline so the CO gets our retriable status rather than a timeout. */
const MARGIN_MS = 1000;
const FLOOR_MS = 200;

export function callWaitMs(call: ServerUnaryCall<unknown, unknown>, configuredMs: number): number {
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : Number(deadline);
  if (!Number.isFinite(deadlineMs) || deadlineMs <= 0) return configuredMs;
  return Math.max(FLOOR_MS, Math.min(configuredMs, deadlineMs - Date.now() - MARGIN_MS));
}

/** The caller has given up: it cancelled the call, or its deadline has passed. */
export function callAbandoned(call: ServerUnaryCall<unknown, unknown>): boolean {
  if (call.cancelled) return true;
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : Number(deadline);
  return Number.isFinite(deadlineMs) && deadlineMs > 0 && deadlineMs < Date.now();
}
