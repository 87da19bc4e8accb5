import type { NodeView } from '../common/names';

/**
 * Orders the nodes a new volume may go to: live nodes inside the requisite set with room for it, the
 * preferred ones first (in the CO's order), then the rest in a random order weighted by free space. Free space
 * is only as fresh as the last heartbeat, so always taking the emptiest node would send every create between
 * two heartbeats to the same node. Pure: the workflow passes its deterministic Math.random.
 */
export interface PlacementRequest {
  capacityBytes: number;
  /** Node IDs the volume must be accessible from; undefined means anywhere. */
  requisite?: string[];
  preferred: string[];
  /** Keep nodes whose record shows too little room: their pool decides (a restore's or clone's one node). */
  askPoolWhenFull?: boolean;
}

export function rankCandidates(nodes: NodeView[], request: PlacementRequest, random: () => number): NodeView[] {
  const allowed = request.requisite ? new Set(request.requisite) : undefined;
  const fits = nodes.filter(
    (node) =>
      node.live &&
      (!allowed || allowed.has(node.nodeId)) &&
      (request.askPoolWhenFull === true || node.availableBytes >= request.capacityBytes),
  );
  const preferred = [...new Set(request.preferred)].flatMap((nodeId) => fits.filter((node) => node.nodeId === nodeId));
  const rest = fits.filter((node) => !request.preferred.includes(node.nodeId));
  return [...preferred, ...weightedShuffle(rest, random)];
}

/**
 * Efraimidis-Spirakis in log form (ln(u)/weight, exact for any byte count): a node with twice the free space is
 * twice as likely to come first.
 */
function weightedShuffle(nodes: NodeView[], random: () => number): NodeView[] {
  return nodes
    .map((node) => ({ node, score: Math.log(random()) / Math.max(1, node.availableBytes) }))
    .sort((a, b) => b.score - a.score || a.node.nodeId.localeCompare(b.node.nodeId))
    .map(({ node }) => node);
}
