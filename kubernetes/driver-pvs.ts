import type { CoreV1Api, V1PersistentVolume } from '@kubernetes/client-node';
import { parseVolumeId } from '../common/names';

/** A PersistentVolume of this driver, reduced to what durable-csi reasons about. */
export interface DriverPv {
  name: string;
  uid: string;
  volumeHandle: string;
  /** The home node named by the volume ID; undefined for a handle this driver could not have issued. */
  nodeId: string | undefined;
  phase: string;
  /** namespace/name of the bound claim, if any. */
  claim: string | undefined;
}

/** Every PV whose CSI driver is ours (one list call; PVs are cluster-scoped). */
export async function listDriverPvs(core: CoreV1Api, driverName: string): Promise<DriverPv[]> {
  const list = await core.listPersistentVolume();
  return list.items.filter((pv) => pv.spec?.csi?.driver === driverName).map(toDriverPv);
}

function toDriverPv(pv: V1PersistentVolume): DriverPv {
  const volumeHandle = pv.spec?.csi?.volumeHandle ?? '';
  const claim = pv.spec?.claimRef;
  return {
    name: pv.metadata?.name ?? '',
    uid: pv.metadata?.uid ?? '',
    volumeHandle,
    nodeId: parseVolumeId(volumeHandle)?.nodeId,
    phase: pv.status?.phase ?? 'Unknown',
    claim: claim ? `${claim.namespace}/${claim.name}` : undefined,
  };
}
