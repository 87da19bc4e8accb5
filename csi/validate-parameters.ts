import { DriverError, FailureType } from '../common/failures';
import { FS_TYPE_PARAMETER } from './fs-type';

/**
 * StorageClass parameters the driver understands. external-provisioner adds the csi.storage.k8s.io/pv/* and
 * pvc/* keys with --extra-create-metadata; they are accepted and kept for the record. It strips
 * csi.storage.k8s.io/fstype from CreateVolume (it becomes the capability's fs_type) but passes the class's
 * parameters unchanged to GetCapacity, so that key is accepted too (the Kubernetes e2e found it).
 */
const KNOWN_PARAMETERS = new Set<string>([FS_TYPE_PARAMETER]);
const PROVISIONER_METADATA = /^csi\.storage\.k8s\.io\/((pv|pvc)\/(name|namespace)|fstype)$/;

export function checkParameters(parameters: Record<string, string>): Record<string, string> {
  const unknown = Object.keys(parameters).filter(
    (key) => !KNOWN_PARAMETERS.has(key) && !PROVISIONER_METADATA.test(key),
  );
  if (unknown.length > 0) {
    const supported = KNOWN_PARAMETERS.size ? [...KNOWN_PARAMETERS].join(', ') : 'none yet';
    throw new DriverError(
      FailureType.InvalidArgument,
      `unknown parameter(s) ${unknown.join(', ')}; supported StorageClass parameters: ${supported}`,
    );
  }
  return { ...parameters };
}
