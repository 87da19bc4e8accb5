import type { Client } from '@temporalio/client';
import { DriverError, FailureType } from '../common/failures';
import {
  controlTaskQueue,
  createWorkflowId,
  deleteWorkflowId,
  expandWorkflowId,
  inspectWorkflowId,
  listWorkflowId,
  NodeIdKey,
  oneOffTag,
  OperationKey,
  PhaseKey,
  PvcNameKey,
  PvcNamespaceKey,
  VolumeIdKey,
  VolumeNameKey,
  type NodeView,
  parseVolumeId,
} from '../common/names';
import { everyPage, MAX_PAGE_ENTRIES } from '../common/list-position';
import type { InspectedVolume } from '../activities/node-activities';
import { readNodeRecord, readNodeViews } from '../node-records/reads';
import type * as workflows from '../workflows';
import {
  requestShape,
  type CreateRequestShape,
  type CreateVolumeInput,
  type CreateVolumeResult,
} from '../workflows/create-volume';
import type { DeleteVolumeResult } from '../workflows/node-work';
import type { ExpandVolumeResult } from '../workflows/expand-volume';
import type { ListVolumesPage } from '../workflows/listing';
import type { VolumeProblem } from '../storage/pool/backend';
import { controllerVolumeHealth, listVolumeHealth, type VolumeHealthEntry } from './volume-health';
import {
  attachToCreate,
  boundedResult,
  deliverForget,
  phaseAttributes,
  requestDetails,
  resultOrWait,
  startOrAttach,
  waitingSuffix,
  type Bounded,
  type CreateRequestTiming,
} from './start-or-attach';

/** What the CO accepts of a volume's size: at least `requiredBytes`, at most `limitBytes` (0: no limit). */
export interface CapacityRange {
  requiredBytes: number;
  limitBytes: number;
}

/** Every volume, from every page: `answeredNodes` only the nodes that answered every page that asked them. */
export type ListVolumesResult = Omit<ListVolumesPage, 'nextToken'>;

/**
 * What the CSI controller asks of Temporal for volumes, one method per operation: each starts or attaches to the
 * operation's workflow and waits a bounded time (./start-or-attach.ts); an unfinished operation is reported as
 * Aborted (retriable) and keeps running durably.
 */
export class VolumeOperations {
  constructor(
    private readonly client: Client,
    private readonly driverName: string,
    /** The client shares the NativeConnection of a worker polling the control queue in this process. */
    private readonly options: { eagerStart?: boolean; pvcAttributes?: boolean } = {},
  ) {}

  /**
   * Starts the name's create workflow or attaches to it (a completed run whose volume was deleted since is started
   * again only for a request sent after that deletion: attachToCreate). CSI: the same name with an incompatible
   * size or parameters is ALREADY_EXISTS, never a second volume. A run that finishes within the wait is judged from
   * its result (no DescribeWorkflowExecution); an unfinished or failed one from its start memo.
   */
  async create(
    input: CreateVolumeInput,
    range: CapacityRange,
    waitMs: number,
    request: CreateRequestTiming,
  ): Promise<CreateVolumeResult> {
    const handle = await attachToCreate<typeof workflows.createVolume>(
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
    let outcome: Bounded<CreateVolumeResult>;
    try {
      outcome = await boundedResult(this.client, handle, waitMs);
    } catch (error) {
      // An incompatible request is ALREADY_EXISTS even when the run it found failed; any other error stays as is.
      await this.checkCompatible(input, range).catch((checkError: unknown) => {
        if (checkError instanceof DriverError && checkError.type === FailureType.AlreadyExists) throw checkError;
      });
      throw error;
    }
    if (outcome.done) {
      assertCompatible(outcome.value.request, input, range);
      return outcome.value;
    }
    await this.checkCompatible(input, range);
    throw new DriverError(FailureType.Aborted, `creation of volume "${input.name}" is still in progress; retry`);
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
    const wait = { what: 'deletion', id: volumeId, nodeId: parts.nodeId, waitMs };
    return resultOrWait(this.client, this.driverName, handle, wait);
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
    const wait = { what: 'expansion', id: volumeId, nodeId: parts.nodeId, waitMs };
    return resultOrWait(this.client, this.driverName, handle, wait);
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

  /** ControllerGetVolumeHealth: the volume's problems as the cluster knows them (./volume-health.ts). */
  health(volumeId: string): Promise<VolumeProblem[]> {
    return controllerVolumeHealth(this.client, this.driverName, volumeId, (id) => this.inspect(id));
  }

  /** ControllerListVolumeHealth: the volumes with a problem, after the volume ID `after` (./volume-health.ts). */
  listHealth(after: string, maxEntries: number): Promise<{ entries: VolumeHealthEntry[]; nextToken: string }> {
    return listVolumeHealth(this.client, this.driverName, after, maxEntries);
  }

  /** One page of the volumes after `after` (a list position), from the pools; one short workflow. */
  async listPage(after: string, maxEntries: number): Promise<ListVolumesPage> {
    return this.client.workflow.execute<typeof workflows.listVolumesPage>('listVolumesPage', {
      workflowId: listWorkflowId(this.driverName, oneOffTag()),
      taskQueue: controlTaskQueue(this.driverName),
      args: [{ driverName: this.driverName, after, maxEntries }],
      workflowExecutionTimeout: '1m',
    });
  }

  /**
   * Every volume, page after page (the orphan report, operator views). The pages are read one after another, so a
   * volume created or deleted meanwhile may or may not appear, as with any ListVolumes paging.
   */
  async list(): Promise<ListVolumesResult> {
    const every = await everyPage(async (after) => {
      const { volumes, ...page } = await this.listPage(after, MAX_PAGE_ENTRIES);
      return { entries: volumes, ...page };
    });
    return { volumes: every.entries, unreachableNodes: every.unreachableNodes, answeredNodes: every.answeredNodes };
  }

  /** GetCapacity's nodes: those of the segment, or without one every node with a record (O(nodes)), read fresh. */
  async capacityNodes(segment: string[] | undefined): Promise<NodeView[]> {
    return readNodeViews(this.client, this.driverName, segment);
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
        ...(this.options.pvcAttributes ? pvcAttributes(input.parameters) : []),
      ],
      staticSummary: `create ${input.name} (${input.capacityBytes} bytes)${claimSuffix(input.parameters)}`,
      staticDetails: `**Request**: ${JSON.stringify({ ...input, driverName: undefined })}`,
      replaceCompleted,
    });
  }

  /** Judged from the start memo of the name's latest run. */
  private async checkCompatible(input: CreateVolumeInput, range: CapacityRange): Promise<void> {
    const description = await this.client.workflow.getHandle(createWorkflowId(this.driverName, input.name)).describe();
    const request = description.memo?.request as CreateRequestShape | undefined;
    if (request) assertCompatible(request, input, range);
  }
}

/** external-provisioner's --extra-create-metadata: the claim the volume is made for. */
const PVC_NAMESPACE = 'csi.storage.k8s.io/pvc/namespace';
const PVC_NAME = 'csi.storage.k8s.io/pvc/name';

function pvcAttributes(parameters: Record<string, string>) {
  const namespace = parameters[PVC_NAMESPACE];
  const name = parameters[PVC_NAME];
  if (!namespace || !name) return [];
  return [
    { key: PvcNamespaceKey, value: namespace },
    { key: PvcNameKey, value: name },
  ];
}

/** " for PVC ns/name" in the workflow's summary (the Temporal UI's list), when the CO said which claim. */
function claimSuffix(parameters: Record<string, string>): string {
  const namespace = parameters[PVC_NAMESPACE];
  const name = parameters[PVC_NAME];
  return namespace && name ? ` for PVC ${namespace}/${name}` : '';
}

/** ALREADY_EXISTS when `earlier` does not satisfy the new request (CSI: same name, other size or parameters). */
function assertCompatible(earlier: CreateRequestShape, input: CreateVolumeInput, range: CapacityRange): void {
  const why = incompatibility(earlier, input, range);
  if (why) throw new DriverError(FailureType.AlreadyExists, `volume "${input.name}" already exists with ${why}`);
}

function incompatibility(
  earlier: CreateRequestShape,
  wanted: CreateRequestShape,
  range: CapacityRange,
): string | undefined {
  const sizeFits =
    earlier.capacityBytes >= range.requiredBytes &&
    (range.limitBytes === 0 || earlier.capacityBytes <= range.limitBytes);
  if (!sizeFits) return `a size of ${earlier.capacityBytes} bytes`;
  if (JSON.stringify(sortKeys(earlier.parameters)) !== JSON.stringify(sortKeys(wanted.parameters)))
    return 'different parameters';
  if ((earlier.accessType ?? 'mount') !== (wanted.accessType ?? 'mount') || earlier.fsType !== wanted.fsType)
    return `another access type or filesystem (${earlier.accessType ?? 'mount'} ${earlier.fsType ?? ''})`;
  const source = (shape: CreateRequestShape) => JSON.stringify(shape.contentSource ?? null);
  if (source(earlier) !== source(wanted)) return `another content source (${source(earlier)})`;
  return undefined;
}

function sortKeys(record: Record<string, string>): [string, string][] {
  return Object.entries(record).sort(([a], [b]) => a.localeCompare(b));
}
