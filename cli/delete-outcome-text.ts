import { parseVolumeId } from '../common/volume-id';

/**
 * What `volumes delete` prints after a successful DeleteVolume. CSI answers success for a volume that does not
 * exist, so success alone is no proof that anything was deleted: the controller's outcome header says what was.
 */
export function describeDeleteOutcome(volumeId: string, outcome?: string, reason?: string): string {
  const parts = parseVolumeId(volumeId);
  if (!parts) {
    return `nothing to delete: "${volumeId}" is not a volume ID this driver issues (v1_<node>_<pool>_<key>)`;
  }
  const node = parts.nodeId;
  switch (outcome) {
    case 'deleted':
      return `deleted ${volumeId}`;
    case 'absent':
      return `nothing to delete: node ${node} has no volume ${volumeId} (deleted earlier, or never created)`;
    case 'pool-replaced':
      return `nothing to delete: ${volumeId} was issued on an earlier pool of node ${node}; its current pool never held it`;
    case 'node-never-registered':
      // Only deletions answered by release 0.1, which trusted a missing registry entry.
      return `nothing deleted: release 0.1 found node ${node} missing from its registry and did not ask the node`;
    case 'node-forgotten':
      return `${volumeId} written off: node ${node} was forgotten (${reason ?? 'no reason given'}); nothing was deleted on its disk`;
    default:
      return `DeleteVolume succeeded for ${volumeId} (the controller did not say what it found)`;
  }
}
