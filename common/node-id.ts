/**
 * Node IDs are lower-case DNS names (as Kubernetes node names usually are) of at most 75 characters, which is
 * what the 128-byte volume ID leaves for them. No "_", so volume IDs split unambiguously.
 */
export const MAX_NODE_ID_LENGTH = 75;
const NODE_ID = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export function isValidNodeId(nodeId: string): boolean {
  return nodeId.length <= MAX_NODE_ID_LENGTH && NODE_ID.test(nodeId);
}
