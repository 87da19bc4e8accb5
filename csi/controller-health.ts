/**
 * ControllerGetVolumeHealth and ControllerListVolumeHealth (CSI v1.13, alpha): the volume's problems as the cluster
 * knows them (operations/volume-health.ts): its node offline, unknown or forgotten, its deletion waiting for its node
 * or written off. An unknown or malformed ID is NOT_FOUND, a token this driver did not issue ABORTED (the spec's).
 */
import { DriverError, FailureType } from '../common/failures';
import { parseVolumeId } from '../common/names';
import type { VolumeOperations } from '../operations/volume-operations';
import type { VolumeProblem } from '../storage/pool/backend';
import type { ControllerGetVolumeHealthRequest__Output } from './generated/csi/v1/ControllerGetVolumeHealthRequest';
import type { ControllerGetVolumeHealthResponse } from './generated/csi/v1/ControllerGetVolumeHealthResponse';
import type { ControllerListVolumeHealthRequest__Output } from './generated/csi/v1/ControllerListVolumeHealthRequest';
import type { ControllerListVolumeHealthResponse } from './generated/csi/v1/ControllerListVolumeHealthResponse';
import type { VolumeHealth } from './generated/csi/v1/VolumeHealth';
import { assertMaxEntries, unusableToken } from './list-coverage';

export const HEALTH_CAPABILITIES = ['GET_VOLUME_HEALTH', 'LIST_VOLUME_HEALTH'];

const STATUS = { degraded: 'DEGRADED', inaccessible: 'INACCESSIBLE', 'data-loss': 'DATA_LOSS' } as const;

export function controllerHealthHandlers(operations: VolumeOperations) {
  return {
    async ControllerGetVolumeHealth(
      request: ControllerGetVolumeHealthRequest__Output,
    ): Promise<ControllerGetVolumeHealthResponse> {
      if (!request.volume_id) throw new DriverError(FailureType.InvalidArgument, 'volume_id is required');
      return { volume_health: volumeHealth(request.volume_id, await operations.health(request.volume_id)) };
    },

    async ControllerListVolumeHealth(
      request: ControllerListVolumeHealthRequest__Output,
    ): Promise<ControllerListVolumeHealthResponse> {
      assertMaxEntries(request.max_entries);
      const token = request.starting_token;
      if (token && !parseVolumeId(token)) throw unusableToken(token);
      const page = await operations.listHealth(token, request.max_entries);
      return {
        entries: page.entries.map((entry) => volumeHealth(entry.volumeId, entry.problems)),
        next_token: page.nextToken,
      };
    },
  };
}

function volumeHealth(volumeId: string, problems: VolumeProblem[]): VolumeHealth {
  return {
    volume_id: volumeId,
    health_statuses: problems.map((problem) => ({
      status: STATUS[problem.status],
      reason: problem.reason,
      message: problem.message,
    })),
  };
}
