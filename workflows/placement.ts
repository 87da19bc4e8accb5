import type { NodeView } from '../common/registry-types';

/**
 * Orders the nodes a new volume may go to: live nodes inside the requisite set with room for it, the
 * preferred ones first (in the CO's order), then the rest by most free space. Pure and deterministic.
 */
export interface PlacementRequest {
  capacityBytes: number;
  /** Node IDs the volume must be accessible from; undefined means anywhere. */
  requisite?: string[];
  preferred: string[];
}

export function rankCandidates(nodes: NodeView[], request: PlacementRequest): NodeView[] {
  const allowed = request.requisite ? new Set(request.requisite) : undefined;
  const fits = nodes.filter(
    (node) => node.live && (!allowed || allowed.has(node.nodeId)) && node.availableBytes >= request.capacityBytes,
  );
  const preferenceRank = (node: NodeView) => {
    const index = request.preferred.indexOf(node.nodeId);
    return index === -1 ? Number.MAX_SAFE_INTEGER : index;
  };
  return fits.sort(
    (a, b) =>
      preferenceRank(a) - preferenceRank(b) || b.availableBytes - a.availableBytes || a.nodeId.localeCompare(b.nodeId),
  );
}

/** Requisite nodes the registry has never seen: a request naming only those can never be placed. */
export function unknownNodes(nodes: NodeView[], requisite: string[] | undefined): string[] {
  if (!requisite) return [];
  const known = new Set(nodes.map((node) => node.nodeId));
  return requisite.filter((nodeId) => !known.has(nodeId));
}
