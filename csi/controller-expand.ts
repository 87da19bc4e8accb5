import type { ServerUnaryCall } from '@grpc/grpc-js';
import { DriverError, FailureType } from '../common/failures';
import { formatBytes } from '../common/quantity';
import type { VolumeOperations } from '../operations/volume-operations';
import { callWaitMs } from './call-wait';
import type { ControllerExpandVolumeRequest__Output } from './generated/csi/v1/ControllerExpandVolumeRequest';
import type { ControllerExpandVolumeResponse } from './generated/csi/v1/ControllerExpandVolumeResponse';
import { toBytes } from './validate-create';

/** ControllerExpandVolume: validated here, then a durable workflow on the volume's home node. */
export async function controllerExpandVolume(
  operations: VolumeOperations,
  options: { maxVolumeBytes: number; callWaitMs: number },
  request: ControllerExpandVolumeRequest__Output,
  call: ServerUnaryCall<unknown, unknown>,
): Promise<ControllerExpandVolumeResponse> {
  if (!request.volume_id) throw new DriverError(FailureType.InvalidArgument, 'volume_id is required');
  if (!request.capacity_range) throw new DriverError(FailureType.InvalidArgument, 'capacity_range is required');
  const requiredBytes = toBytes(request.capacity_range.required_bytes, 'required_bytes');
  const limitBytes = toBytes(request.capacity_range.limit_bytes, 'limit_bytes');
  if (requiredBytes === 0 && limitBytes === 0) {
    throw new DriverError(FailureType.InvalidArgument, 'capacity_range needs required_bytes or limit_bytes');
  }
  if (limitBytes > 0 && limitBytes < requiredBytes) {
    throw new DriverError(FailureType.InvalidArgument, 'capacity_range: limit_bytes is below required_bytes');
  }
  const target = requiredBytes || limitBytes;
  if (target > options.maxVolumeBytes) {
    throw new DriverError(
      FailureType.OutOfRange,
      `${formatBytes(target)} exceeds the largest volume this driver creates (${formatBytes(options.maxVolumeBytes)})`,
    );
  }
  const result = await operations.expand(request.volume_id, target, callWaitMs(call, options.callWaitMs));
  if (limitBytes > 0 && result.capacityBytes > limitBytes) {
    throw new DriverError(
      FailureType.OutOfRange,
      `volume is already ${result.capacityBytes} bytes, above limit_bytes ${limitBytes}; volumes never shrink`,
    );
  }
  const block = request.volume_capability?.block !== undefined && request.volume_capability?.block !== null;
  return {
    capacity_bytes: String(result.capacityBytes),
    node_expansion_required: result.nodeExpansionRequired && !block,
  };
}
