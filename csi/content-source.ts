/** The content source of a CreateVolume (restore or clone, served with --snapshots): checked, and its node. */
import { DriverError, FailureType } from '../common/failures';
import { parseSnapshotId, parseVolumeId } from '../common/ids';
import type { VolumeContentSource__Output } from './generated/csi/v1/VolumeContentSource';

/**
 * A CreateVolume's content source, checked: an ID this driver could not have issued is NOT_FOUND (CSI: the source
 * does not exist). The node named by the ID is the only one that can serve the request.
 */
export function contentSourceOf(source: VolumeContentSource__Output): {
  contentSource: { snapshotId: string } | { volumeId: string };
  nodeId: string;
} {
  if (source.snapshot) {
    const id = source.snapshot.snapshot_id;
    const parts = parseSnapshotId(id);
    if (!parts)
      throw new DriverError(FailureType.NotFound, `snapshot ${JSON.stringify(id)} was not issued by this driver`);
    return { contentSource: { snapshotId: id }, nodeId: parts.nodeId };
  }
  if (source.volume) {
    const id = source.volume.volume_id;
    const parts = parseVolumeId(id);
    if (!parts)
      throw new DriverError(FailureType.NotFound, `volume ${JSON.stringify(id)} was not issued by this driver`);
    return { contentSource: { volumeId: id }, nodeId: parts.nodeId };
  }
  throw invalid('volume_content_source names neither a snapshot nor a volume');
}

/**
 * The source's node is the only place the copy can be made. A requisite topology that leaves it out cannot be
 * served: RESOURCE_EXHAUSTED, CSI's code for "cannot be provisioned in accessible_topology" (docs/design.md).
 */
export function placeOnSourceNode(
  nodeId: string,
  requisite: string[] | undefined,
  what: string,
): { requisite: string[]; preferred: string[] } {
  if (requisite && !requisite.includes(nodeId)) {
    throw new DriverError(
      FailureType.ResourceExhausted,
      `${what} is on node ${nodeId}, and a volume made from it can only be made there; the requisite topology ` +
        `allows only ${requisite.join(', ')}`,
    );
  }
  return { requisite: [nodeId], preferred: [nodeId] };
}

function invalid(message: string): DriverError {
  return new DriverError(FailureType.InvalidArgument, message);
}
