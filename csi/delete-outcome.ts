import { Metadata } from '@grpc/grpc-js';
import type { DeleteVolumeResult } from '../workflows/deletion';

/**
 * What a successful DeleteVolume found, sent as response headers: the CSI response is empty, and our CLI must
 * be able to say "nothing to delete, and why" instead of "deleted". CSI clients ignore unknown headers.
 */
export const DELETE_OUTCOME_HEADER = 'durable-csi-delete-outcome';
/** For node-forgotten: the operator's reason, URI-encoded (header values are ASCII). */
export const DELETE_REASON_HEADER = 'durable-csi-delete-reason';

/** `never-issued`: the ID is malformed, so no deletion was started. */
export type DeleteOutcome = DeleteVolumeResult['outcome'] | 'never-issued';

export function deleteOutcomeHeaders(result: DeleteVolumeResult | 'never-issued'): Metadata {
  const headers = new Metadata();
  headers.set(DELETE_OUTCOME_HEADER, result === 'never-issued' ? result : result.outcome);
  if (result !== 'never-issued' && result.reason) headers.set(DELETE_REASON_HEADER, encodeURIComponent(result.reason));
  return headers;
}

export function readDeleteOutcome(headers: Metadata): { outcome?: string; reason?: string } {
  const [outcome] = headers.get(DELETE_OUTCOME_HEADER);
  const [reason] = headers.get(DELETE_REASON_HEADER);
  return {
    outcome: typeof outcome === 'string' ? outcome : undefined,
    reason: typeof reason === 'string' ? safeDecode(reason) : undefined,
  };
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
