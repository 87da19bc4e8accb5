import { status, type ServiceError } from '@grpc/grpc-js';
import type { CsiClients } from '../../csi/client';
import { parseVolumeId } from '../../common/names';
import type { TestCluster } from '../support/cluster';
import { MiB, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { leftoversIn, measure, type OnRetry } from './measure';
import type { CostMeter } from './phase-cost';
import type { LevelResult } from './report';

/** Where a level looks for what its deletes left behind. */
export interface PoolView {
  pool(nodeId: string): string;
  volumesOnDisk(nodeId: string): string[];
}

export interface DurableTarget<Pools extends PoolView = TestCluster> {
  cluster: Pools;
  clients: CsiClients;
  nodes: string[];
  /** Per-attempt gRPC deadline. */
  rpcTimeoutMs: number;
  /** How long a call keeps retrying retriable answers, like a CO would. */
  retryBudgetMs: number;
  /**
   * 'node': every create names one node in a requisite topology (round robin over `nodes`), as external-provisioner
   * does with WaitForFirstConsumer and strict topology; 'none': no topology, the controller places the volume.
   */
  topology: 'node' | 'none';
}

/** The node the index-th create of a run names, or undefined without topology. */
export function nodeFor(target: Pick<DurableTarget, 'nodes' | 'topology'>, index: number): string | undefined {
  return target.topology === 'node' ? target.nodes[index % target.nodes.length] : undefined;
}

/** Like retryLikeCo, reporting every retriable answer that it retried. */
async function retried<T>(attempt: () => Promise<T>, onRetry: OnRetry, budgetMs: number): Promise<T> {
  const codes: string[] = [];
  let succeeded = false;
  try {
    const value = await retryLikeCo(async () => {
      try {
        return await attempt();
      } catch (error) {
        const code = (error as ServiceError).code;
        codes.push(code === undefined ? 'NO_CODE' : (status[code] ?? String(code)));
        throw error;
      }
    }, budgetMs);
    succeeded = true;
    return value;
  } finally {
    // A failed call's last answer was not retried.
    (succeeded ? codes : codes.slice(0, -1)).forEach((code) => onRetry(code));
  }
}

function createOne(target: DurableTarget<PoolView>, name: string, index: number, onRetry: OnRetry): Promise<string> {
  const nodeId = nodeFor(target, index);
  const request = createRequest(name, MiB, nodeId === undefined ? {} : onNode(nodeId));
  return retried(
    async () => {
      const answer = await createVolume(target.clients, request, target.rpcTimeoutMs);
      const volumeId = answer.volume?.volume_id;
      if (!volumeId) throw new Error(`CreateVolume ${name} answered without a volume_id`);
      return volumeId;
    },
    onRetry,
    target.retryBudgetMs,
  );
}

export async function warmUpDurable(target: DurableTarget<PoolView>, runId: string, count: number): Promise<void> {
  for (let index = 0; index < count; index++) {
    const volumeId = await createOne(target, `bench-${runId}-warmup-${index}`, index, () => undefined);
    await retried(
      () => deleteVolume(target.clients, volumeId, target.rpcTimeoutMs),
      () => undefined,
      60_000,
    );
  }
}

export async function runDurableLevel(
  target: DurableTarget<PoolView>,
  meter: CostMeter,
  runId: string,
  concurrency: number,
  ops: number,
): Promise<LevelResult> {
  const names = Array.from({ length: ops }, (_, index) => `bench-${runId}-c${concurrency}-${index}`);
  const createStart = await meter.begin();
  const items = names.map((name, index) => ({ name, index }));
  const created = await measure(items, concurrency, ({ name, index }, onRetry) =>
    createOne(target, name, index, onRetry),
  );
  const createCost = await meter.end(createStart, names.length);
  const volumeIds = created.values.filter((id): id is string => id !== undefined);

  const placement: Record<string, number> = {};
  for (const volumeId of volumeIds) {
    const nodeId = parseVolumeId(volumeId)?.nodeId ?? 'unparseable';
    placement[nodeId] = (placement[nodeId] ?? 0) + 1;
  }

  const deleteStart = await meter.begin();
  const deleted = await measure(volumeIds, concurrency, (volumeId, onRetry) =>
    retried(() => deleteVolume(target.clients, volumeId, target.rpcTimeoutMs), onRetry, target.retryBudgetMs),
  );
  const deleteCost = await meter.end(deleteStart, volumeIds.length);
  const leftovers = target.nodes.flatMap((nodeId) => [
    ...target.cluster.volumesOnDisk(nodeId).map((key) => `${nodeId}: volumes/${key} (volumesOnDisk)`),
    ...leftoversIn(target.cluster.pool(nodeId))
      .filter((entry) => !entry.startsWith('volumes/'))
      .map((entry) => `${nodeId}: ${entry}`),
  ]);
  return {
    concurrency,
    create: created.result,
    delete: deleted.result,
    placement,
    leftovers,
    cost: { create: createCost, delete: deleteCost },
  };
}
