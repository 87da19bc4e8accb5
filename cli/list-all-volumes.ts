import { Metadata } from '@grpc/grpc-js';
import { TOPOLOGY_NODE_KEY } from '../common/names';
import { call, withDeadline, type CsiClients } from '../csi/client';
import type { ListVolumesResponse__Output } from '../csi/generated/csi/v1/ListVolumesResponse';
import { readUnansweredNodes } from '../csi/list-coverage';

export interface ListedVolumes {
  volumes: { volumeId: string; capacityBytes: number; nodeId: string }[];
  /** Registered nodes some page could not ask: their volumes are missing from `volumes`. */
  unansweredNodes: string[];
}

/** Every page of ListVolumes, as external-provisioner would read them, with the nodes no page covered. */
export async function listAllVolumes(clients: CsiClients, timeoutMs: number): Promise<ListedVolumes> {
  const volumes: ListedVolumes['volumes'] = [];
  const unanswered = new Set<string>();
  let token = '';
  do {
    let headers = new Metadata();
    const page = await call<ListVolumesResponse__Output>((done) =>
      clients.controller
        .ListVolumes({ max_entries: 1000, starting_token: token }, withDeadline(timeoutMs), done)
        .on('metadata', (metadata: Metadata) => (headers = metadata)),
    );
    for (const nodeId of readUnansweredNodes(headers)) unanswered.add(nodeId);
    for (const entry of page.entries) {
      const volume = entry.volume;
      volumes.push({
        volumeId: volume?.volume_id ?? '',
        capacityBytes: Number(volume?.capacity_bytes ?? 0),
        nodeId: volume?.accessible_topology[0]?.segments[TOPOLOGY_NODE_KEY] ?? '',
      });
    }
    token = page.next_token;
  } while (token);
  return { volumes, unansweredNodes: [...unanswered].sort() };
}

/** The stderr line under the table: the list is true only for the nodes that answered. */
export function describeUnanswered(nodeIds: string[], what: 'volumes' | 'snapshots' = 'volumes'): string | undefined {
  if (nodeIds.length === 0) return undefined;
  const [nodes, their] = nodeIds.length === 1 ? ['node', 'its'] : ['nodes', 'their'];
  return `${nodes} ${nodeIds.join(', ')} did not answer: ${their} ${what} are missing from this list`;
}
