import type { CoreV1Api, CustomObjectsApi, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import type { Logger } from '../common/logger';
import { parseVolumeId } from '../common/names';
import { statusOf } from './api-status';
import { listDriverSnapshotContents } from './snapshot-contents';

/** The claim annotation the scheduler writes for a WaitForFirstConsumer claim (and removes to reschedule it). */
export const SELECTED_NODE = 'volume.kubernetes.io/selected-node';

/** A claim's data source when the claim is a copy (a restore or a clone) still waiting for its node. */
export interface CopySource {
  kind: 'snapshot' | 'claim';
  namespace: string;
  name: string;
}

/**
 * The source of a claim that is a restore (a VolumeSnapshot) or a clone (a PersistentVolumeClaim) and has no node
 * yet: not bound, not being deleted, no node selected. Undefined for every other claim.
 */
export function copySourceOf(claim: V1PersistentVolumeClaim): CopySource | undefined {
  const meta = claim.metadata;
  if (!meta?.name || !meta.namespace || meta.deletionTimestamp) return undefined;
  if (claim.spec?.volumeName || meta.annotations?.[SELECTED_NODE]) return undefined;
  if (claim.status?.phase !== undefined && claim.status.phase !== 'Pending') return undefined;
  const source = claim.spec?.dataSourceRef ?? claim.spec?.dataSource;
  if (!source?.name) return undefined;
  // dataSourceRef may name another namespace (CrossNamespaceVolumeDataSource); dataSource never does.
  const namespace = (source as { namespace?: string }).namespace || meta.namespace;
  if (source.kind === 'VolumeSnapshot' && source.apiGroup === 'snapshot.storage.k8s.io')
    return { kind: 'snapshot', namespace, name: source.name };
  if (source.kind === 'PersistentVolumeClaim' && !source.apiGroup)
    return { kind: 'claim', namespace, name: source.name };
  return undefined;
}

/**
 * A restore or clone can only be made on its source's node (csi/validate-create.ts, placeOnSourceNode), but the
 * scheduler does not know that: it places a WaitForFirstConsumer claim's Pod on any node the published capacity
 * allows, CreateVolume there answers RESOURCE_EXHAUSTED, and the scheduler, asked again, may choose the same node for
 * ever (a Pod that prefers it). So the controller (`--kubernetes`) selects the source's node for such a claim itself,
 * as the scheduler would (the `volume.kubernetes.io/selected-node` annotation): the scheduler then places the Pod
 * only there, and external-provisioner makes the volume there at once. Only claims whose source is a volume or a
 * VolumeSnapshotContent of this driver; the patch carries the claim's resourceVersion, so a scheduler that selected a
 * node meanwhile wins (409) and a second controller replica's patch is refused the same way.
 */
export class CopyPlacement {
  constructor(
    private readonly deps: {
      core: CoreV1Api;
      custom: CustomObjectsApi;
      driverName: string;
      logger: Logger;
      /** The claim, from the watch's cache. */
      claim(namespace: string, name: string): V1PersistentVolumeClaim | undefined;
      /** Writes the annotation as a merge patch (its content type is set by the caller: client-node is ESM). */
      select(claim: V1PersistentVolumeClaim, node: string): Promise<void>;
    },
  ) {}

  /** A claim added or changed: selects its source's node when it is a copy of this driver's still waiting. */
  async seen(claim: V1PersistentVolumeClaim): Promise<void> {
    const source = copySourceOf(claim);
    if (!source) return;
    const node = await this.sourceNode(source);
    if (!node) return;
    const where = { claim: `${claim.metadata?.namespace}/${claim.metadata?.name}`, node, source };
    try {
      await this.deps.select(claim, node);
      this.deps.logger.info(where, "a restore's or clone's claim: its source's node selected");
    } catch (error) {
      // Changed meanwhile (the scheduler chose, another replica selected): the watch brings the new version.
      if (statusOf(error) === 409 || statusOf(error) === 404) return;
      throw error;
    }
  }

  /** The node holding the source, when the source is this driver's and exists; undefined otherwise. */
  private async sourceNode(source: CopySource): Promise<string | undefined> {
    if (source.kind === 'claim') {
      const volumeName = this.deps.claim(source.namespace, source.name)?.spec?.volumeName;
      if (!volumeName) return undefined;
      const pv = await this.deps.core.readPersistentVolume({ name: volumeName }).catch((error: unknown) => {
        if (statusOf(error) === 404) return undefined;
        throw error;
      });
      if (pv?.spec?.csi?.driver !== this.deps.driverName) return undefined;
      return parseVolumeId(pv.spec.csi.volumeHandle)?.nodeId;
    }
    const contents = await listDriverSnapshotContents(this.deps.custom, this.deps.driverName);
    if (contents === 'not-installed') return undefined;
    const content = contents.find(
      (c) =>
        !c.deleting && c.nodeId && c.snapshotRef?.namespace === source.namespace && c.snapshotRef.name === source.name,
    );
    return content?.nodeId;
  }
}
