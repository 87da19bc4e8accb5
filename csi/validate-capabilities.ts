import { DriverError, FailureType } from '../common/failures';
import type { VolumeCapability__Output } from './generated/csi/v1/VolumeCapability';

export type AccessType = 'mount' | 'block';

/** Node-local volumes can be used from one node only; multi-node modes are refused, not silently narrowed. */
const SINGLE_NODE_MODES = new Set([
  'SINGLE_NODE_WRITER',
  'SINGLE_NODE_READER_ONLY',
  'SINGLE_NODE_SINGLE_WRITER',
  'SINGLE_NODE_MULTI_WRITER',
]);

/** Checks every capability and returns the access type they agree on. */
export function checkCapabilities(capabilities: VolumeCapability__Output[]): AccessType {
  if (capabilities.length === 0) throw invalid('volume_capabilities is required');
  const types = new Set<AccessType>();
  for (const capability of capabilities) {
    if (capability.block) types.add('block');
    else if (capability.mount) types.add('mount');
    else throw invalid('each volume capability needs an access type (mount or block)');
    const mode = String(capability.access_mode?.mode ?? 'UNKNOWN');
    if (!SINGLE_NODE_MODES.has(mode)) {
      throw invalid(`access mode ${mode} is not supported: node-local volumes allow single-node modes only`);
    }
  }
  if (types.size > 1) throw invalid('volume_capabilities mix block and mount access; ask for one');
  return [...types][0] as AccessType;
}

function invalid(message: string): DriverError {
  return new DriverError(FailureType.InvalidArgument, message);
}
