import { supportsBlock } from '../common/backend-kinds';
import { DriverError, FailureType } from '../common/failures';
import type { VolumeOperations } from '../operations/volume-operations';
import type { ValidateVolumeCapabilitiesRequest__Output } from './generated/csi/v1/ValidateVolumeCapabilitiesRequest';
import type { ValidateVolumeCapabilitiesResponse } from './generated/csi/v1/ValidateVolumeCapabilitiesResponse';
import { checkCapabilities, checkParameters } from './validate-create';

/** Confirms capabilities the volume's node can serve; anything unsupported is left unconfirmed, with why. */
export async function validateVolumeCapabilities(
  operations: VolumeOperations,
  request: ValidateVolumeCapabilitiesRequest__Output,
): Promise<ValidateVolumeCapabilitiesResponse> {
  if (!request.volume_id) throw new DriverError(FailureType.InvalidArgument, 'volume_id is required');
  if (request.volume_capabilities.length === 0) {
    throw new DriverError(FailureType.InvalidArgument, 'volume_capabilities is required');
  }
  const { node } = await operations.inspect(request.volume_id);
  let accessType: 'mount' | 'block';
  try {
    checkParameters(request.parameters);
    accessType = checkCapabilities(request.volume_capabilities);
  } catch (error) {
    if (error instanceof DriverError) return { message: error.message };
    throw error;
  }
  if (accessType === 'block' && !supportsBlock(node.backend)) {
    return { message: `node ${node.nodeId} runs the ${node.backend} backend, which has no block volumes` };
  }
  return {
    confirmed: {
      volume_context: request.volume_context,
      volume_capabilities: request.volume_capabilities,
      parameters: request.parameters,
    },
  };
}
