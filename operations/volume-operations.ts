import type { Client, WorkflowHandle } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { NodeRecordView } from '../node-records/reads';
import { readAllNodeRecords, readNodeRecord } from '../node-records/reads';
import { DriverError, FailureType } from '../common/failures';
import {
  controlTaskQueue,
  createWorkflowId,
  deleteWorkflowId,
  expandWorkflowId,
  inspectWorkflowId,
  oneOffTag,
  nodeForgottenSignal,
  type ForgetNotice,
  NodeIdKey,
  OperationKey,
  PhaseKey,
  VolumeIdKey,
  VolumeNameKey,
  WaitingSinceKey,
} from '../common/names';
import type { NodeView } from '../common/names';
import { parseVolumeId } from '../common/ids';
import { incompatibility, requestShape, type CapacityRange, type CreateRequestShape } from '../common/create-request';
import type { CreateVolumeInput, CreateVolumeResult } from '../workflows/create-volume';
import type { DeleteVolumeResult } from '../workflows/deletion';
import type { ExpandVolumeResult } from '../workflows/expand-volume';
import type { InspectedVolume } from '../activities/node-activities';
import type { ListVolumesPage } from '../workflows/listing';
import type * as workflows from '../workflows';
import type { SearchAttributePair, WorkflowResultType } from '@temporalio/common';
import { boundedResult, type Bounded } from './bounded-result';
import { describeWait } from './describe-wait';
import { listEveryVolume, listVolumePage, type ListVolumesResult } from './list-volumes';
import { attachToCreate, startOrAttach, type CreateRequestTiming } from './start-or-attach';

export type { CapacityRange };

/**
 * What the CSI controller asks of Temporal. Each call starts or attaches to the volume's workflow and waits a
 * bounded time; an unfinished operation is reported as Aborted (retriable) and keeps running durably.
 */
export class VolumeOperations {
  constructor(
    private readonly client: Client,
    private readonly driverName: string,
    /** The client shares the NativeConnection of a worker polling the control queue in this process. */
    private readonly options: { eagerStart?: boolean } = {},
  ) {}

  /**
   * Starts the name's create workflow or attaches to it. A completed run whose volume has since been deleted is
   * started again (a new volume reusing the name), but only for a request sent after that deletion: a stale retry
   * reaching the controller late must not leak a volume nobody asks for any more.
   */
  async create(
    input: CreateVolumeInput,
    range: CapacityRange,
    waitMs: number,
    request: CreateRequestTiming,
  ): Promise<CreateVolumeResult> {
    const workflowId = createWorkflowId(this.driverName, input.name);
    const handle = await this.attachCreate(input, request);
    // The common case (the run finishes within the wait) judges compatibility from the result and costs no
    // DescribeWorkflowExecution; an unfinished or failed run, or one from a release without `request` in its
    // result, is judged from its memo.
    let outcome: Bounded<CreateVolumeResult>;
    try {
      outcome = await boundedResult(this.client, handle, waitMs);
    } catch (error) {
      // An incompatible request is ALREADY_EXISTS even when the run it found failed; any other error stays as is.
      await this.checkCompatible(workflowId, input, range).catch((checkError: unknown) => {
        if (checkError instanceof DriverError && checkError.type === FailureType.AlreadyExists) throw checkError;
      });
      throw error;
    }
    if (outcome.done && outcome.value.request) {
      assertCompatible(outcome.value.request, input, range);
      return outcome.value;
    }
    await this.checkCompatible(workflowId, input, range);
    if (outcome.done) return outcome.value;
    throw new DriverError(FailureType.Aborted, `creation of volume "${input.name}" is still in progress; retry`);
  }

  private attachCreate(input: CreateVolumeInput, request: CreateRequestTiming) {
    return attachToCreate<typeof workflows.createVolume>(
      this.client,
      {
        noun: 'volume',
        name: input.name,
        driverName: this.driverName,
        start: (replaceCompleted) => this.startCreate(input, replaceCompleted),
        made: ({ volumeId, nodeId }) => ({
          id: volumeId,
          nodeId,
          deletionWorkflowId: deleteWorkflowId(this.driverName, volumeId),
        }),
      },
      request,
    );
  }

  /**
   * Starts or attaches to the volume's deletion. Only a malformed ID is answered without one: every well-formed
   * ID, even one naming a node nobody knows, waits in that node's queue (no missing record is proof of absence).
   */
  async delete(volumeId: string, waitMs: number): Promise<DeleteVolumeResult | 'never-issued'> {
    const parts = parseVolumeId(volumeId);
    if (!parts) return 'never-issued';
    const record = await readNodeRecord(this.client, this.driverName, parts.nodeId);
    const { handle } = await startOrAttach<typeof workflows.deleteVolume>(this.client, 'deleteVolume', {
      workflowId: deleteWorkflowId(this.driverName, volumeId),
      eagerStart: this.options.eagerStart,
      taskQueue: controlTaskQueue(this.driverName),
      args: [
        { driverName: this.driverName, volumeId, ...parts, nodeLive: record?.node?.live, forgotten: record?.forgotten },
      ],
      searchAttributes: [
        { key: OperationKey, value: 'delete' },
        { key: VolumeIdKey, value: volumeId },
        { key: NodeIdKey, value: parts.nodeId },
        ...phaseAttributes(record),
      ],
      staticSummary: `delete ${volumeId} on node ${parts.nodeId}${waitingSuffix(record)}`,
      staticDetails: requestDetails(`delete volume \`${volumeId}\``, parts.nodeId, record),
    });
    if (record?.forgotten) await deliverForget(handle, record.forgotten);
    return this.resultOrWait('deletion', handle, volumeId, parts.nodeId, waitMs);
  }

  /** Grows a volume on its node; waits for an offline or unknown node like a deletion does. */
  async expand(volumeId: string, capacityBytes: number, waitMs: number): Promise<ExpandVolumeResult> {
    const parts = parseVolumeId(volumeId);
    if (!parts) throw new DriverError(FailureType.NotFound, `volume ${volumeId} was not issued by this driver`);
    const record = await readNodeRecord(this.client, this.driverName, parts.nodeId);
    if (record?.forgotten)
      throw new DriverError(
        FailureType.NotFound,
        `volume ${volumeId} was on node ${parts.nodeId}, forgotten for good (${record.forgotten.reason})`,
      );
    const { handle } = await startOrAttach<typeof workflows.expandVolume>(this.client, 'expandVolume', {
      workflowId: expandWorkflowId(this.driverName, volumeId, capacityBytes),
      eagerStart: this.options.eagerStart,
      taskQueue: controlTaskQueue(this.driverName),
      args: [{ driverName: this.driverName, volumeId, ...parts, capacityBytes, nodeLive: record?.node?.live }],
      searchAttributes: [
        { key: OperationKey, value: 'expand' },
        { key: VolumeIdKey, value: volumeId },
        { key: NodeIdKey, value: parts.nodeId },
        ...phaseAttributes(record),
      ],
      staticSummary: `expand ${volumeId} on node ${parts.nodeId} to ${capacityBytes} bytes${waitingSuffix(record)}`,
      staticDetails: requestDetails(`grow \`${volumeId}\` to ${capacityBytes} bytes`, parts.nodeId, record),
    });
    return this.resultOrWait('expansion', handle, volumeId, parts.nodeId, waitMs);
  }

  /** The operation's result within `waitMs`, else ABORTED saying how long it has waited for its node and why. */
  private async resultOrWait<W extends typeof workflows.deleteVolume | typeof workflows.expandVolume>(
    what: 'deletion' | 'expansion',
    handle: WorkflowHandle<W>,
    volumeId: string,
    nodeId: string,
    waitMs: number,
  ): Promise<WorkflowResultType<W>> {
    const outcome = await boundedResult(this.client, handle, waitMs);
    if (outcome.done) return outcome.value;
    const [description, now] = await Promise.all([
      handle.describe(),
      readNodeRecord(this.client, this.driverName, nodeId),
    ]);
    throw new DriverError(
      FailureType.Aborted,
      describeWait(what, volumeId, nodeId, now, description.startTime, new Date()),
    );
  }

  /** The volume as its node holds it; NotFound when this driver never issued it or the node lacks it. */
  async inspect(volumeId: string): Promise<{ node: NodeView; volume: InspectedVolume }> {
    const parts = parseVolumeId(volumeId);
    if (!parts) throw new DriverError(FailureType.NotFound, `volume ${volumeId} was not issued by this driver`);
    const node = (await readNodeRecord(this.client, this.driverName, parts.nodeId))?.node;
    if (!node)
      throw new DriverError(
        FailureType.Unavailable,
        `volume ${volumeId} names node ${parts.nodeId}, which has no record`,
      );
    const volume = await this.client.workflow.execute<typeof workflows.inspectVolume>('inspectVolume', {
      workflowId: inspectWorkflowId(this.driverName, volumeId, oneOffTag()),
      taskQueue: controlTaskQueue(this.driverName),
      args: [{ driverName: this.driverName, ...parts }],
      workflowExecutionTimeout: '1m',
    });
    if (!volume)
      throw new DriverError(FailureType.NotFound, `volume ${volumeId} does not exist on node ${parts.nodeId}`);
    return { node, volume };
  }

  /** Every volume, from every page (see list-volumes.ts). */
  async list(): Promise<ListVolumesResult> {
    return listEveryVolume(this.client, this.driverName);
  }

  /** One page of the volumes after the list position `after`. */
  async listPage(after: string, maxEntries: number): Promise<ListVolumesPage> {
    return listVolumePage(this.client, this.driverName, after, maxEntries);
  }

  /** The named nodes' records, read fresh; nodes without a record are left out. */
  async nodesNamed(nodeIds: string[]): Promise<NodeView[]> {
    const records = await Promise.all(nodeIds.map((nodeId) => readNodeRecord(this.client, this.driverName, nodeId)));
    return records.flatMap((record) => (record?.node ? [record.node] : []));
  }

  /** Every node with a record, read fresh: O(nodes), for the topology-less GetCapacity only. */
  async allNodes(): Promise<NodeView[]> {
    const records = await readAllNodeRecords(this.client, this.driverName);
    return records.flatMap((record) => (record.node && !record.forgotten ? [record.node] : []));
  }

  private startCreate(input: CreateVolumeInput, replaceCompleted: boolean) {
    const memo: CreateRequestShape = requestShape(input);
    return startOrAttach<typeof workflows.createVolume>(this.client, 'createVolume', {
      workflowId: createWorkflowId(this.driverName, input.name),
      eagerStart: this.options.eagerStart,
      taskQueue: controlTaskQueue(this.driverName),
      args: [input],
      memo: { request: memo },
      searchAttributes: [
        { key: OperationKey, value: 'create' },
        { key: VolumeNameKey, value: input.name },
        { key: PhaseKey, value: 'placing' },
      ],
      staticSummary: `create ${input.name} (${input.capacityBytes} bytes)`,
      staticDetails: `**Request**: ${JSON.stringify({ ...input, driverName: undefined })}`,
      replaceCompleted,
    });
  }

  /** CSI: the same name with an incompatible size or parameters is ALREADY_EXISTS, never a second volume. */
  private async checkCompatible(workflowId: string, input: CreateVolumeInput, range: CapacityRange): Promise<void> {
    const description = await this.client.workflow.getHandle(workflowId).describe();
    const request = description.memo?.request as CreateRequestShape | undefined;
    if (request) assertCompatible(request, input, range);
  }
}

/**
 * A deletion that started just before its node was forgotten (its controller read the record a moment too early,
 * and the forget's visibility query did not list it yet) would wait for ever: every later call that sees the
 * decision hands it over. A run started by this call has it in its input already; one that has ended ignores it.
 */
export async function deliverForget(handle: WorkflowHandle, notice: ForgetNotice): Promise<void> {
  try {
    await handle.signal(nodeForgottenSignal, notice);
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error; // completed meanwhile: nothing waits
  }
}

/** The phase an operation on the node starts in (its workflow follows the node from there). */
export function phaseAttributes(record: NodeRecordView | undefined): SearchAttributePair[] {
  if (record?.node?.live) return [{ key: PhaseKey, value: 'running' }];
  return [
    { key: PhaseKey, value: 'waiting-for-node' },
    { key: WaitingSinceKey, value: new Date() },
  ];
}

/** The one-line summary's tail for an operation that starts while its node is down or unknown. */
function waitingSuffix(record: NodeRecordView | undefined): string {
  if (record?.node?.live) return '';
  const since = new Date().toISOString().slice(11, 19);
  return record?.node
    ? `: waiting for the node since ${since} UTC`
    : `: waiting for a node with no record (unknown) since ${since} UTC`;
}

/** Markdown shown under Details in the Temporal UI: the request (never its secrets) and the node as last seen. */
function requestDetails(request: string, nodeId: string, record: NodeRecordView | undefined): string {
  const node = record?.node;
  const state = node
    ? `${node.live ? 'live' : 'offline'}, last heartbeat ${new Date(node.lastHeartbeat).toISOString()}`
    : 'no record (no agent has registered it); if it is gone for good: `durable-csi nodes forget ' +
      nodeId +
      ' --reason ...`';
  return [
    `**Request**: ${request}`,
    `**Node**: ${nodeId}, ${state} (when the operation started; the phase follows the node since)`,
    'Attempts and waits so far: see Pending Activities and the timeline.',
  ].join('\n\n');
}

function assertCompatible(earlier: CreateRequestShape, input: CreateVolumeInput, range: CapacityRange): void {
  const why = incompatibility(earlier, input, range);
  if (why) throw new DriverError(FailureType.AlreadyExists, `volume "${input.name}" already exists with ${why}`);
}
