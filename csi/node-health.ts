/**
 * NodeGetVolumeHealth and NodeGetStorageHealth (CSI v1.13, alpha): what is wrong with a volume or with the pool, as
 * this node sees it (storage/pool/publishing.ts holds the one checker, which NodeGetVolumeStats' volume_condition
 * answers too). Each problem says what is wrong, on which node, and what to do (docs/operations.md, "Volume health").
 * A pool the gate refused (agent/pool-gate.ts: its disk not mounted, another pool there, an unfit filesystem) is
 * the node's answer for every volume of this node; a pool not open yet for any other reason (Temporal not reached
 * yet) is UNAVAILABLE, never a guess.
 */
import path from 'node:path';
import { DriverError, FailureType } from '../common/failures';
import { parseVolumeId } from '../common/names';
import type { PoolProblem, VolumeProblem } from '../storage/pool/backend';
import type { NodeGetStorageHealthResponse } from './generated/csi/v1/NodeGetStorageHealthResponse';
import type { NodeGetVolumeHealthRequest__Output } from './generated/csi/v1/NodeGetVolumeHealthRequest';
import type { NodeGetVolumeHealthResponse } from './generated/csi/v1/NodeGetVolumeHealthResponse';
import type { NodeContext } from './node-requests';
import { required, volumeKey } from './node-requests';

const VOLUME_STATUS = { degraded: 'DEGRADED', inaccessible: 'INACCESSIBLE', 'data-loss': 'DATA_LOSS' } as const;
const STORAGE_STATUS = { degraded: 'STORAGE_DEGRADED', unreachable: 'STORAGE_UNREACHABLE' } as const;

/**
 * Kubernetes 1.37 refuses a CSINode status whose storage health message is longer (its validation): kubelet's whole
 * update would fail, and the condition never show. The gate's refusal, with a long pool path, comes near.
 */
const MAX_MESSAGE = 1024;

/** The reason a refused pool is given, on the volume and on the storage. */
export const POOL_REFUSED = 'PoolRefused';

export function healthHandlers(context: NodeContext) {
  const onNode = (message: string) => {
    const said = `node ${context.nodeId}: ${message}`;
    return said.length <= MAX_MESSAGE ? said : `${said.slice(0, MAX_MESSAGE - 1)}…`;
  };
  return {
    async NodeGetVolumeHealth(request: NodeGetVolumeHealthRequest__Output): Promise<NodeGetVolumeHealthResponse> {
      const volumeId = required(request.volume_id, 'volume_id');
      for (const [field, value] of [
        ['volume_publish_path', request.volume_publish_path],
        ['staging_target_path', request.staging_target_path],
      ] as const) {
        if (value && (!path.isAbsolute(value) || value.includes('\0')))
          throw new DriverError(FailureType.InvalidArgument, `${field} must be an absolute path, not ${value}`);
      }
      const refusal = context.poolRefusal();
      const parts = parseVolumeId(volumeId);
      let problems: VolumeProblem[];
      if (refusal !== undefined && parts?.nodeId === context.nodeId) {
        problems = [{ status: 'inaccessible', reason: POOL_REFUSED, message: refusal }];
      } else {
        problems = await context.backend.volumeHealth(volumeKey(volumeId, context));
      }
      return {
        volume_health: {
          volume_id: volumeId,
          health_statuses: problems.map((problem) => ({
            status: VOLUME_STATUS[problem.status],
            reason: problem.reason,
            message: onNode(problem.message),
          })),
        },
      };
    },

    async NodeGetStorageHealth(): Promise<NodeGetStorageHealthResponse> {
      const refusal = context.poolRefusal();
      let problems: PoolProblem[];
      if (refusal !== undefined) {
        problems = [{ status: 'unreachable', reason: POOL_REFUSED, message: refusal }];
      } else {
        context.poolId(); // UNAVAILABLE, with the reason, while the pool is not open yet
        problems = await context.backend.poolHealth();
      }
      return {
        backend_health: problems.map((problem) => ({
          status: STORAGE_STATUS[problem.status],
          reason: problem.reason,
          message: onNode(problem.message),
        })),
      };
    },
  };
}
