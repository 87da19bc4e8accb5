import { parseGroupSnapshotId, parseSnapshotId, parseVolumeId } from '../common/names';

/**
 * What `volumes delete` prints after a successful DeleteVolume. CSI answers success for a volume that does not
 * exist, so success alone is no proof that anything was deleted: the controller's outcome header says what was.
 */
export function describeDeleteOutcome(volumeId: string, outcome?: string, reason?: string): string {
  const parts = parseVolumeId(volumeId);
  if (!parts) {
    return `nothing to delete: "${volumeId}" is not a volume ID this driver issues (v1_<node>_<pool>_<key>)`;
  }
  return (
    describeOutcome('volume', volumeId, parts.nodeId, outcome, reason) ??
    `DeleteVolume succeeded for ${volumeId} (the controller did not say what it found)`
  );
}

/** What `snapshots delete` prints once the deletion workflow has answered (the ID was checked before). */
export function describeSnapshotDeleteOutcome(snapshotId: string, outcome: string, reason?: string): string {
  const node = parseSnapshotId(snapshotId)?.nodeId ?? '?';
  return (
    describeOutcome('snapshot', snapshotId, node, outcome, reason) ??
    `the deletion of ${snapshotId} ended with ${outcome}`
  );
}

/** What `snapshots delete` prints once a group snapshot's deletion has answered (every member, or none, gone). */
export function describeGroupSnapshotDeleteOutcome(groupSnapshotId: string, outcome: string, reason?: string): string {
  const node = parseGroupSnapshotId(groupSnapshotId)?.nodeId ?? '?';
  return (
    describeOutcome('group snapshot', groupSnapshotId, node, outcome, reason) ??
    `the deletion of ${groupSnapshotId} ended with ${outcome}`
  );
}

/** The outcomes a volume's and a snapshot's deletion share (docs/snapshots.md, DeleteSnapshot). */
function describeOutcome(
  what: 'volume' | 'snapshot' | 'group snapshot',
  id: string,
  node: string,
  outcome: string | undefined,
  reason: string | undefined,
): string | undefined {
  switch (outcome) {
    case 'deleted':
      return `deleted ${id}`;
    case 'absent':
      return `nothing to delete: node ${node} has no ${what} ${id} (deleted earlier, or never created)`;
    case 'pool-replaced':
      return `nothing to delete: ${id} was issued on an earlier pool of node ${node}; its current pool never held it`;
    case 'node-forgotten':
      return `${id} written off: node ${node} was forgotten (${reason ?? 'no reason given'}); nothing was deleted on its disk`;
    default:
      return undefined;
  }
}
