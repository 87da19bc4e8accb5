import { Metadata } from '@grpc/grpc-js';

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

/** The nodes a page did not cover; none when the header is absent (a server of an earlier release). */
export function readUnansweredNodes(headers: Metadata): string[] {
  const [value] = headers.get(UNANSWERED_NODES_HEADER);
  return typeof value === 'string' && value ? value.split(',') : [];
}
