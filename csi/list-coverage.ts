import { Metadata } from '@grpc/grpc-js';
import { DriverError, FailureType } from '../common/failures';

/**
 * Which registered nodes a ListVolumes page could not ask, sent as a response header: their volumes are missing
 * from the page, and CSI's response has no field to say so. Our CLI reports them; CSI clients ignore the header.
 * Node IDs are DNS-like, so a comma separates them.
 */
export const UNANSWERED_NODES_HEADER = 'durable-csi-unanswered-nodes';

export function listCoverageHeaders(unansweredNodes: readonly string[]): Metadata {
  const headers = new Metadata();
  headers.set(UNANSWERED_NODES_HEADER, unansweredNodes.join(','));
  return headers;
}

/** CSI: a starting_token the plugin cannot use is ABORTED (the CO starts the listing again). */
export function unusableToken(token: string): DriverError {
  return new DriverError(
    FailureType.Aborted,
    `starting_token "${token.slice(0, 140)}" was not issued by this driver; list again without a token`,
  );
}

/** A negative max_entries is INVALID_ARGUMENT; 0 means "as many as the driver gives". */
export function assertMaxEntries(maxEntries: number): void {
  if (maxEntries < 0) throw new DriverError(FailureType.InvalidArgument, 'max_entries must not be negative');
}

/** The nodes a page did not cover; none when the header is absent (a server of an earlier release). */
export function readUnansweredNodes(headers: Metadata): string[] {
  const [value] = headers.get(UNANSWERED_NODES_HEADER);
  return typeof value === 'string' && value ? value.split(',') : [];
}
