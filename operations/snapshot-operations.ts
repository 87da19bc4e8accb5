import type { Client } from '@temporalio/client';
import { DriverError, FailureType } from '../common/failures';
import { everyPage, MAX_PAGE_ENTRIES } from '../common/list-position';
import {
  controlTaskQueue,
  createSnapshotWorkflowId,
  deleteSnapshotWorkflowId,
  listSnapshotsWorkflowId,
  type ForgottenNode,
  NodeIdKey,
  oneOffTag,
  OperationKey,
  VolumeIdKey,
  parseSnapshotId,
  parseVolumeId,
} from '../common/names';
import type { NodeSnapshotFilter } from '../activities/node-activities';
import { readNodeRecord, type NodeRecordView } from '../node-records/reads';
import type * as workflows from '../workflows';
import type { CreateSnapshotResult } from '../workflows/create-snapshot';
import type { DeleteSnapshotResult } from '../workflows/deletion';
import type { ListSnapshotsPage } from '../workflows/listing';
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
