import type { NodeListPage } from '../activities/node-activities';
import { pastNode } from '../common/list-position';
import { formatVolumeId, poolIdPrefix } from '../common/volume-id';
import type { ListedVolume, ListVolumesResult } from './list-volumes';

/** `unreachableNodes` and `answeredNodes` name only the nodes this page asked. */
export interface ListVolumesPage extends ListVolumesResult {
  /** Where the next page starts (a list position); '' when this is the last page. */
  nextToken: string;
}

/**
 * Puts the nodes' answers, taken in volume-ID order of the nodes, into one page of at most `limit` entries, and says
 * where the next page starts. Pure, so the page's edges (full inside a node, full at a node's end, a node that did
 * not answer, the node budget used up) are tested without a cluster.
 */
export class PageBuilder {
  private readonly page: ListVolumesPage = { volumes: [], unreachableNodes: [], answeredNodes: [], nextToken: '' };

  constructor(
    private readonly limit: number,
    private position: string,
  ) {}

  /** Where the nodes not added yet continue from. */
  get after(): string {
    return this.position;
  }

  get room(): number {
    return this.limit - this.page.volumes.length;
  }

  /** One node's answer (undefined: it did not answer); the finished page once it is full. */
  add(nodeId: string, answer: NodeListPage | undefined, lastNode: boolean): ListVolumesPage | undefined {
    if (!answer) {
      this.page.unreachableNodes.push(nodeId);
    } else {
      this.page.answeredNodes!.push(nodeId);
      const room = this.room;
      this.page.volumes.push(...answer.volumes.slice(0, room).map((volume) => listed(nodeId, answer, volume)));
      if (answer.volumes.length > room || answer.more) {
        // Full inside this node (or its answer hit its byte bound): the next page continues after its last volume.
        return { ...this.page, nextToken: this.page.volumes[this.page.volumes.length - 1]?.volumeId ?? this.position };
      }
    }
    this.position = pastNode(nodeId);
    if (this.room === 0) return this.finish(!lastNode);
    return undefined;
  }

  /** `moreNodes`: nodes after the last one added may hold volumes, so the listing goes on from here. */
  finish(moreNodes: boolean): ListVolumesPage {
    return { ...this.page, nextToken: moreNodes ? this.position : '' };
  }
}

function listed(nodeId: string, answer: NodeListPage, volume: NodeListPage['volumes'][number]): ListedVolume {
  return {
    volumeId: formatVolumeId({ nodeId, poolIdPrefix: poolIdPrefix(answer.poolId), key: volume.key }),
    name: volume.name,
    nodeId,
    capacityBytes: volume.capacityBytes,
  };
}
