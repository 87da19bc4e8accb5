import type { Client } from '@temporalio/client';
import { DriverError, FailureType } from '../common/failures';
import { everyPage, MAX_PAGE_ENTRIES } from '../common/list-position';
import {
  controlTaskQueue,
  createGroupSnapshotWorkflowId,
  createSnapshotWorkflowId,
  deleteGroupSnapshotWorkflowId,
  deleteSnapshotWorkflowId,
  listSnapshotsWorkflowId,
  type ForgottenNode,
  NodeIdKey,
  oneOffTag,
  OperationKey,
  VolumeIdKey,
  parseGroupSnapshotId,
  parseSnapshotId,
  parseVolumeId,
  type SnapshotIdParts,
} from '../common/names';
import type { NodeSnapshotFilter } from '../activities/node-activities';
import { readNodeRecord, type NodeRecordView } from '../node-records/reads';
import type * as workflows from '../workflows';
import type { CreateSnapshotResult } from '../workflows/create-snapshot';
import type { DeleteSnapshotResult } from '../workflows/node-work';
import type { ListSnapshotsPage, ListedSnapshot } from '../workflows/listing';
import type {
  CreateVolumeGroupSnapshotResult,
  DeleteVolumeGroupSnapshotResult,
  GroupMember,
} from '../workflows/group-snapshots';
import { newSnapshotKey } from './snapshot-key';
import {
  attachToCreate,
  deliverForget,
  phaseAttributes,
  resultOrWait,
  startOrAttach,
  type CreateRequestTiming,
  type ReusableName,
} from './start-or-attach';

/**
 * What the CSI controller asks of Temporal for snapshots (docs/snapshots.md): as for volumes, each call starts or
 * attaches to its workflow and waits a bounded time; an unfinished one answers ABORTED and keeps running durably.
 */
export class SnapshotOperations {
  constructor(
    private readonly client: Client,
    private readonly driverName: string,
    private readonly options: { eagerStart?: boolean } = {},
  ) {}

  /**
   * The name's snapshot of `sourceVolumeId`; the name already taken by a snapshot of another volume: ALREADY_EXISTS.
   * A copy not done (running, or waiting for its node) is ABORTED, never an ID the CO could delete meanwhile: a
   * DeleteSnapshot that reached the pool before the copy would find nothing, answer OK, and the copy would land
   * after it, unowned (docs/snapshots.md). A name whose snapshot was deleted makes a new one, as a volume's does
   * (attachToCreate): only for a request sent after the deletion ended, and ABORTED while it runs.
   */
  async create(
    name: string,
    sourceVolumeId: string,
    waitMs: number,
    request: CreateRequestTiming,
  ): Promise<CreateSnapshotResult> {
    const parts = parseVolumeId(sourceVolumeId);
    if (!parts) {
      throw new DriverError(FailureType.NotFound, `source volume ${sourceVolumeId} was not issued by this driver`);
    }
    const record = await readNodeRecord(this.client, this.driverName, parts.nodeId);
    if (record?.forgotten) {
      throw new DriverError(
        FailureType.NotFound,
        `volume ${sourceVolumeId} was on node ${parts.nodeId}, forgotten for good (${record.forgotten.reason})`,
      );
    }
    const reusable: ReusableName<typeof workflows.createSnapshot> = {
      noun: 'snapshot',
      name,
      driverName: this.driverName,
      start: (replaceCompleted) => this.startCreate(name, sourceVolumeId, parts, record, replaceCompleted),
      made: ({ snapshotId, nodeId }) => ({
        id: snapshotId,
        nodeId,
        deletionWorkflowId: deleteSnapshotWorkflowId(this.driverName, snapshotId),
      }),
    };
    const handle = await attachToCreate(this.client, reusable, request);
    const description = await handle.describe();
    const asked = (description.memo as { sourceVolumeId?: string } | undefined)?.sourceVolumeId;
    if (asked !== undefined && asked !== sourceVolumeId) {
      throw new DriverError(
        FailureType.AlreadyExists,
        `snapshot "${name}" already exists of volume ${asked}, not of the requested ${sourceVolumeId}`,
      );
    }
    const wait = { what: `snapshot "${name}"`, id: sourceVolumeId, nodeId: parts.nodeId, waitMs };
    return resultOrWait(this.client, this.driverName, handle, wait);
  }

  /**
   * Starts or attaches to the snapshot's deletion. Only a malformed ID is answered without one: a well-formed ID
   * naming a node that is down or unknown waits in that node's queue, as a volume's deletion does.
   */
  async delete(snapshotId: string, waitMs: number): Promise<DeleteSnapshotResult | 'never-issued'> {
    const parts = parseSnapshotId(snapshotId);
    if (!parts) return 'never-issued';
    const record = await readNodeRecord(this.client, this.driverName, parts.nodeId);
    const { handle } = await startOrAttach<typeof workflows.deleteSnapshot>(this.client, 'deleteSnapshot', {
      workflowId: deleteSnapshotWorkflowId(this.driverName, snapshotId),
      eagerStart: this.options.eagerStart,
      taskQueue: controlTaskQueue(this.driverName),
      args: [
        {
          driverName: this.driverName,
          snapshotId,
          ...parts,
          nodeLive: record?.node?.live,
          forgotten: record?.forgotten,
        },
      ],
      searchAttributes: [
        { key: OperationKey, value: 'snapshot-delete' },
        { key: VolumeIdKey, value: snapshotId },
        { key: NodeIdKey, value: parts.nodeId },
        ...phaseAttributes(record),
      ],
      staticSummary: `delete snapshot ${snapshotId} on node ${parts.nodeId}`,
    });
    if (record?.forgotten) await deliverForget(handle, record.forgotten);
    const wait = { what: 'snapshot deletion', id: snapshotId, nodeId: parts.nodeId, waitMs };
    return resultOrWait(this.client, this.driverName, handle, wait);
  }

  /**
   * One page of the snapshots after the list position `after`, sorted by snapshot ID; a lookup asks its node only.
   * A lookup whose node was forgotten for good asks no node and lists nothing, with the record's decision in
   * `forgotten`: the driver treats that node's snapshots as gone (a restore from one is NOT_FOUND, its DeleteSnapshot
   * OK), and its silence would be UNAVAILABLE for ever. The record is read first (one describe, answered by the
   * server), not on silence: no agent polls a forgotten node's queue, so asking it would cost every call the 5 s a
   * silent node is given. A node that returns clears the decision with its report (workflows/node-presence.ts).
   */
  async listPage(after: string, maxEntries: number, lookup?: SnapshotLookup): Promise<SnapshotsPage> {
    if (lookup) {
      const forgotten = (await readNodeRecord(this.client, this.driverName, lookup.nodeId))?.forgotten;
      if (forgotten) return { snapshots: [], unreachableNodes: [], answeredNodes: [], nextToken: '', forgotten };
    }
    return this.client.workflow.execute<typeof workflows.listSnapshotsPage>('listSnapshotsPage', {
      workflowId: listSnapshotsWorkflowId(this.driverName, oneOffTag()),
      taskQueue: controlTaskQueue(this.driverName),
      args: [{ driverName: this.driverName, after, maxEntries, ...(lookup ? { lookup } : {}) }],
      workflowExecutionTimeout: '1m',
    });
  }

  /** Every snapshot (or every one the lookup names), page after page, sorted by snapshot ID. */
  async list(lookup?: SnapshotLookup): Promise<Omit<ListSnapshotsPage, 'nextToken'>> {
    const every = await everyPage(async (after) => {
      const { snapshots, ...page } = await this.listPage(after, MAX_PAGE_ENTRIES, lookup);
      return { entries: snapshots, ...page };
    });
    return { snapshots: every.entries, unreachableNodes: every.unreachableNodes, answeredNodes: every.answeredNodes };
  }

  /* Group snapshots (docs/snapshots.md, "Group snapshots"): the same rules, for volumes of one node. */

  /**
   * The name's group snapshot of these volumes, all on one node (FailedPrecondition naming the nodes otherwise: CSI's
   * "cannot snapshot multiple volumes together"); the name taken by a group of other volumes: ALREADY_EXISTS. Not
   * done (copying, or waiting for its node): ABORTED, never an ID, as for a snapshot.
   */
  async createGroup(
    name: string,
    sourceVolumeIds: string[],
    waitMs: number,
    request: CreateRequestTiming,
  ): Promise<CreateVolumeGroupSnapshotResult> {
    const parsed = sourceVolumeIds.map((id) => ({ id, parts: parseVolumeId(id) }));
    const strangers = parsed.filter((entry) => !entry.parts).map((entry) => entry.id);
    if (strangers.length > 0) {
      throw new DriverError(
        FailureType.NotFound,
        `source volumes ${strangers.map((id) => id.slice(0, 140)).join(', ')} were not issued by this driver`,
      );
    }
    const members = parsed as { id: string; parts: SnapshotIdParts }[];
    const nodes = [...new Set(members.map((member) => member.parts.nodeId))].sort();
    if (nodes.length > 1) {
      const byNode = nodes.map(
        (node) =>
          `${node}: ${members
            .filter((m) => m.parts.nodeId === node)
            .map((m) => m.id)
            .join(', ')}`,
      );
      throw new DriverError(
        FailureType.FailedPrecondition,
        `a group snapshot is made of volumes of one node, and these are on nodes ${nodes.join(', ')} (${byNode.join(
          '; ',
        )}): each node's volumes can be frozen and copied together only there; group them by node`,
      );
    }
    const nodeId = nodes[0]!;
    const record = await readNodeRecord(this.client, this.driverName, nodeId);
    if (record?.forgotten) {
      throw new DriverError(
        FailureType.NotFound,
        `the volumes were on node ${nodeId}, forgotten for good (${record.forgotten.reason})`,
      );
    }
    const asked = [...sourceVolumeIds].sort();
    const reusable: ReusableName<typeof workflows.createVolumeGroupSnapshot> = {
      noun: 'group snapshot',
      name,
      driverName: this.driverName,
      start: (replaceCompleted) =>
        startOrAttach<typeof workflows.createVolumeGroupSnapshot>(this.client, 'createVolumeGroupSnapshot', {
          workflowId: createGroupSnapshotWorkflowId(this.driverName, name),
          eagerStart: this.options.eagerStart,
          taskQueue: controlTaskQueue(this.driverName),
          args: [
            {
              driverName: this.driverName,
              name,
              nodeId,
              poolIdPrefix: members[0]!.parts.poolIdPrefix,
              groupKey: newSnapshotKey(),
              members: members.map((member): GroupMember => ({
                sourceVolumeId: member.id,
                sourceKey: member.parts.key,
                sourcePoolIdPrefix: member.parts.poolIdPrefix,
                snapshotKey: newSnapshotKey(),
              })),
              nodeLive: record?.node?.live,
            },
          ],
          memo: { sourceVolumeIds: asked },
          searchAttributes: [
            { key: OperationKey, value: 'group-snapshot-create' },
            { key: NodeIdKey, value: nodeId },
            ...phaseAttributes(record),
          ],
          staticSummary: `group snapshot "${name}" of ${asked.length} volumes on node ${nodeId}`,
          replaceCompleted,
        }),
      made: ({ groupSnapshotId, nodeId: madeOn }) => ({
        id: groupSnapshotId,
        nodeId: madeOn,
        deletionWorkflowId: deleteGroupSnapshotWorkflowId(this.driverName, groupSnapshotId),
      }),
    };
    const handle = await attachToCreate(this.client, reusable, request);
    const memo = (await handle.describe()).memo as { sourceVolumeIds?: string[] } | undefined;
    const earlier = memo?.sourceVolumeIds;
    if (earlier !== undefined && earlier.join(',') !== asked.join(',')) {
      throw new DriverError(
        FailureType.AlreadyExists,
        `group snapshot "${name}" already exists of volumes ${earlier.join(', ')}, not of the requested ` +
          asked.join(', '),
      );
    }
    const wait = { what: `group snapshot "${name}"`, id: asked.join(', '), nodeId, waitMs };
    return resultOrWait(this.client, this.driverName, handle, wait);
  }

  /**
   * Starts or attaches to the group's deletion, which waits for its node as a snapshot's does. `snapshotIds` are the
   * members the CO knows: each must be a snapshot ID of the group's node and pool (InvalidArgument), and the node
   * checks they are the group's members. A group ID this driver could not have issued: 'never-issued' (OK).
   */
  async deleteGroup(
    groupSnapshotId: string,
    snapshotIds: string[],
    waitMs: number,
  ): Promise<DeleteVolumeGroupSnapshotResult | 'never-issued'> {
    const parts = parseGroupSnapshotId(groupSnapshotId);
    if (!parts) return 'never-issued';
    const memberKeys = groupMemberKeys(parts, snapshotIds);
    const record = await readNodeRecord(this.client, this.driverName, parts.nodeId);
    const { handle } = await startOrAttach<typeof workflows.deleteVolumeGroupSnapshot>(
      this.client,
      'deleteVolumeGroupSnapshot',
      {
        workflowId: deleteGroupSnapshotWorkflowId(this.driverName, groupSnapshotId),
        eagerStart: this.options.eagerStart,
        taskQueue: controlTaskQueue(this.driverName),
        args: [
          {
            driverName: this.driverName,
            groupSnapshotId,
            nodeId: parts.nodeId,
            poolIdPrefix: parts.poolIdPrefix,
            groupKey: parts.key,
            memberKeys,
            nodeLive: record?.node?.live,
            forgotten: record?.forgotten,
          },
        ],
        memo: { memberKeys: [...memberKeys].sort() },
        searchAttributes: [
          { key: OperationKey, value: 'group-snapshot-delete' },
          { key: VolumeIdKey, value: groupSnapshotId },
          { key: NodeIdKey, value: parts.nodeId },
          ...phaseAttributes(record),
        ],
        staticSummary: `delete group snapshot ${groupSnapshotId} on node ${parts.nodeId}`,
      },
    );
    // A deletion already running with other members named: the CO's list does not match what is being deleted.
    const running = ((await handle.describe()).memo as { memberKeys?: string[] } | undefined)?.memberKeys;
    if (running !== undefined && running.join(',') !== [...memberKeys].sort().join(',')) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `snapshot_ids do not match group snapshot ${groupSnapshotId}, whose deletion names ${running.join(', ')}`,
      );
    }
    if (record?.forgotten) await deliverForget(handle, record.forgotten);
    const wait = { what: 'group snapshot deletion', id: groupSnapshotId, nodeId: parts.nodeId, waitMs };
    return resultOrWait(this.client, this.driverName, handle, wait);
  }

  /**
   * The group's members as its node's pool holds them, by the same lookup as GetSnapshot (only that node is asked):
   * NotFound when it holds none (or the ID is not this driver's, or its node was forgotten for good), Unavailable
   * when the node does not answer; `snapshotIds` (when given) must be exactly the members (InvalidArgument).
   */
  async getGroup(groupSnapshotId: string, snapshotIds: string[]): Promise<ListedSnapshot[]> {
    const parts = parseGroupSnapshotId(groupSnapshotId);
    if (!parts) {
      throw new DriverError(
        FailureType.NotFound,
        `group snapshot ${groupSnapshotId.slice(0, 140)} was not issued by this driver (its group snapshot IDs read ` +
          "g1_<node>_...); check the VolumeGroupSnapshotContent's volumeGroupSnapshotHandle",
      );
    }
    const memberKeys = snapshotIds.length > 0 ? groupMemberKeys(parts, snapshotIds) : [];
    const lookup: SnapshotLookup = {
      nodeId: parts.nodeId,
      only: { poolIdPrefix: parts.poolIdPrefix, groupKey: parts.key },
    };
    // Every page, not the first: an agent of the previous release ignores the group filter and lists its whole pool,
    // whose first page need not hold a member (NOT_FOUND, "deleted", for a group that is there), and a node's answer
    // is bounded in bytes as well as entries. Filtered here too for that agent.
    const every = await everyPage(async (after) => {
      const { snapshots, forgotten, ...page } = await this.listPage(after, MAX_PAGE_ENTRIES, lookup);
      if (forgotten) {
        throw new DriverError(
          FailureType.NotFound,
          `group snapshot ${groupSnapshotId} was on node ${parts.nodeId}, forgotten for good (${forgotten.reason})`,
        );
      }
      return { entries: snapshots, ...page };
    });
    if (every.unreachableNodes.includes(parts.nodeId)) throw silentNode(parts.nodeId);
    const members = every.entries.filter((snapshot) => snapshot.groupSnapshotId === groupSnapshotId);
    if (members.length === 0) {
      throw new DriverError(
        FailureType.NotFound,
        `group snapshot ${groupSnapshotId} is not in node ${parts.nodeId}'s pool: it was deleted (or its pool replaced)`,
      );
    }
    const held = members.map((snapshot) => parseSnapshotId(snapshot.snapshotId)!.key).sort();
    if (memberKeys.length > 0 && held.join(',') !== [...memberKeys].sort().join(',')) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `snapshot_ids do not match group snapshot ${groupSnapshotId}, whose members are ${members
          .map((snapshot) => snapshot.snapshotId)
          .join(', ')}`,
      );
    }
    return members;
  }

  private startCreate(
    name: string,
    sourceVolumeId: string,
    parts: NonNullable<ReturnType<typeof parseVolumeId>>,
    record: NodeRecordView | undefined,
    replaceCompleted: boolean,
  ) {
    return startOrAttach<typeof workflows.createSnapshot>(this.client, 'createSnapshot', {
      workflowId: createSnapshotWorkflowId(this.driverName, name),
      eagerStart: this.options.eagerStart,
      taskQueue: controlTaskQueue(this.driverName),
      args: [
        {
          driverName: this.driverName,
          name,
          sourceVolumeId,
          nodeId: parts.nodeId,
          poolIdPrefix: parts.poolIdPrefix,
          sourceKey: parts.key,
          snapshotKey: newSnapshotKey(),
          nodeLive: record?.node?.live,
        },
      ],
      memo: { sourceVolumeId },
      searchAttributes: [
        { key: OperationKey, value: 'snapshot-create' },
        { key: VolumeIdKey, value: sourceVolumeId },
        { key: NodeIdKey, value: parts.nodeId },
        ...phaseAttributes(record),
      ],
      staticSummary: `snapshot ${sourceVolumeId} as "${name}" on node ${parts.nodeId}`,
      replaceCompleted,
    });
  }
}

/**
 * The keys of a group's members from the CO's snapshot IDs: each must be a snapshot ID of the group's node and pool
 * (InvalidArgument otherwise: CSI's "snapshot list mismatch"), each once.
 */
function groupMemberKeys(group: SnapshotIdParts, snapshotIds: string[]): string[] {
  const keys: string[] = [];
  for (const id of snapshotIds) {
    const parts = parseSnapshotId(id);
    if (!parts || parts.nodeId !== group.nodeId || parts.poolIdPrefix !== group.poolIdPrefix) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `snapshot_ids: ${id.slice(0, 140)} is no member of a group snapshot of node ${group.nodeId} (pool ` +
          `${group.poolIdPrefix}): its members' IDs read s1_${group.nodeId}_${group.poolIdPrefix}_...`,
      );
    }
    if (!keys.includes(parts.key)) keys.push(parts.key);
  }
  return keys;
}

/** A page of snapshots; `forgotten`: a lookup's node was forgotten for good (the decision), so nothing is listed. */
export interface SnapshotsPage extends ListSnapshotsPage {
  forgotten?: ForgottenNode;
}

/** A ListSnapshots by snapshot or source volume ID: the one node that can hold them, and what its pool filters. */
export interface SnapshotLookup {
  nodeId: string;
  only: NodeSnapshotFilter;
}

/**
 * What a ListSnapshots by snapshot ID and/or source volume ID asks: nothing at all (undefined), 'nothing' when no
 * snapshot can match (an ID this driver could not have issued, or two IDs of different nodes or pools: CSI lists
 * nothing, and no node is asked), else the lookup.
 */
export function snapshotLookup(ids: {
  snapshotId?: string;
  sourceVolumeId?: string;
}): SnapshotLookup | 'nothing' | undefined {
  const snapshot = ids.snapshotId ? parseSnapshotId(ids.snapshotId) : undefined;
  const source = ids.sourceVolumeId ? parseVolumeId(ids.sourceVolumeId) : undefined;
  if ((ids.snapshotId && !snapshot) || (ids.sourceVolumeId && !source)) return 'nothing';
  const where = snapshot ?? source;
  if (!where) return undefined;
  if (snapshot && source && (snapshot.nodeId !== source.nodeId || snapshot.poolIdPrefix !== source.poolIdPrefix)) {
    return 'nothing';
  }
  const only: NodeSnapshotFilter = {
    poolIdPrefix: where.poolIdPrefix,
    ...(snapshot && { key: snapshot.key }),
    ...(source && { sourceKey: source.key }),
  };
  return { nodeId: where.nodeId, only };
}

/** A lookup naming one node must not read its silence as "no such snapshot": only that node's pool knows. */
export function silentNode(nodeId: string): DriverError {
  return new DriverError(
    FailureType.Unavailable,
    `node ${nodeId} holds the snapshots asked for and did not answer; ask again once it is back`,
  );
}
