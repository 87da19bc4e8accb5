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
    case 'never-issued':
    case 'node-never-registered':
      return `nothing to delete: node ${node} never registered with this driver, so it holds no volume ${volumeId}`;
    case 'node-forgotten':
      return `${volumeId} written off: node ${node} was forgotten (${reason ?? 'no reason given'}); nothing was deleted on its disk`;
    default:
      return `DeleteVolume succeeded for ${volumeId} (the controller did not say what it found)`;
  }
}
