import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { DriverError, FailureType } from '../common/failures';
import {
  operationTypesClause,
  NodeIdKey,
  OperationKey,
  PhaseKey,
  VolumeIdKey,
  VolumeNameKey,
  WaitingSinceKey,
  isValidNodeId,
  parseSnapshotId,
  parseVolumeId,
} from '../common/names';

const OPERATION_OF_TYPE: Record<string, string> = {
  createVolume: 'create',
  deleteVolume: 'delete',
  expandVolume: 'expand',
  createSnapshot: 'snapshot-create',
  deleteSnapshot: 'snapshot-delete',
  createVolumeGroupSnapshot: 'group-snapshot-create',
  deleteVolumeGroupSnapshot: 'group-snapshot-delete',
  moveVolume: 'move',
  moveSnapshot: 'snapshot-move',
};

/**
 * The operation an operator reads (`volumes stuck`, the pending-operations metric): by workflow type, so that the
 * snapshot runs of earlier builds, whose operation attribute said `snapshot` and `delete-snapshot`, read the same.
 */
export function operationName(type: string, attribute: string | undefined): string {
  return OPERATION_OF_TYPE[type] ?? attribute ?? type;
}

/** A volume or snapshot operation as the visibility store sees it (eventually consistent: seconds behind the workflow). */
export interface OperationSummary {
  workflowId: string;
  runId: string;
  type: string;
  operation: string;
  status: string;
  volumeId: string | null;
  volumeName: string | null;
  nodeId: string | null;
  phase: string | null;
  startTime: Date;
  closeTime: Date | null;
  waitingSince: Date | null;
}

export interface PendingFilter {
  nodeId?: string;
  /** Only operations started before this instant. */
  startedBefore?: Date;
}

// CSI driver names are DNS-like; checking keeps the name from breaking out of a quoted query string.
const DRIVER_NAME = /^[a-zA-Z0-9]([-a-zA-Z0-9.]{0,61}[a-zA-Z0-9])?$/;

/** The visibility clause selecting this driver's volume operations (any status). */
export function driverOperationsClause(driverName: string): string {
  if (!DRIVER_NAME.test(driverName)) {
    throw new DriverError(FailureType.InvalidArgument, `"${driverName}" is not a CSI driver name`);
  }
  return `WorkflowId STARTS_WITH "${driverName}/" AND ${operationTypesClause()}`;
}

export function pendingOperationsQuery(driverName: string, filter: PendingFilter = {}): string {
  const clauses = [driverOperationsClause(driverName), 'ExecutionStatus = "Running"'];
  if (filter.nodeId !== undefined) {
    if (!isValidNodeId(filter.nodeId)) {
      throw new DriverError(FailureType.InvalidArgument, `"${filter.nodeId}" is not a node ID`);
    }
    clauses.push(`${NodeIdKey.name} = "${filter.nodeId}"`);
  }
  if (filter.startedBefore) clauses.push(`StartTime < "${filter.startedBefore.toISOString()}"`);
  return clauses.join(' AND ');
}

/** Running volume and snapshot operations, oldest first. */
export async function listPendingOperations(
  client: Client,
  driverName: string,
  filter: PendingFilter = {},
): Promise<OperationSummary[]> {
  return listOperations(client, pendingOperationsQuery(driverName, filter));
}

export async function listOperations(client: Client, query: string): Promise<OperationSummary[]> {
  const found: OperationSummary[] = [];
  for await (const workflow of client.workflow.list({ query })) found.push(summarize(workflow));
  return found.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
}

/** How many of a node's operations are read for the pool they name (the newest, of a first page). */
const POOL_EVIDENCE_LIMIT = 1000;

/**
 * The pool prefix that the newest volume or snapshot operation of a node names (running or kept by retention), or
 * undefined. The agent asks when its record remembers no pool and its pool directory is empty (agent/pool-gate.ts).
 * A snapshot deletion names its copy's snapshot ID (`s1_`), which carries the pool as a volume ID does: a node whose
 * only waiting work is snapshot deletions must not take an empty directory for its pool either.
 */
export async function poolNamedByOperations(
  client: Client,
  driverName: string,
  nodeId: string,
): Promise<string | undefined> {
  if (!isValidNodeId(nodeId)) throw new DriverError(FailureType.InvalidArgument, `"${nodeId}" is not a node ID`);
  const query = `${driverOperationsClause(driverName)} AND ${NodeIdKey.name} = "${nodeId}"`;
  let newest: { at: number; prefix: string } | undefined;
  let read = 0;
  for await (const workflow of client.workflow.list({ query, pageSize: POOL_EVIDENCE_LIMIT })) {
    const id = workflow.typedSearchAttributes.get(VolumeIdKey);
    const prefix = id ? (parseVolumeId(id) ?? parseSnapshotId(id))?.poolIdPrefix : undefined;
    const at = workflow.startTime.getTime();
    if (prefix && (!newest || at > newest.at)) newest = { at, prefix };
    if (++read >= POOL_EVIDENCE_LIMIT) break;
  }
  return newest?.prefix;
}

/** Also takes a DescribeWorkflowExecution answer, which is current where a listing may lag. */
export function summarize(workflow: Omit<WorkflowExecutionInfo, 'raw'>): OperationSummary {
  const attributes = workflow.typedSearchAttributes;
  return {
    workflowId: workflow.workflowId,
    runId: workflow.runId,
    type: workflow.type,
    operation: operationName(workflow.type, attributes.get(OperationKey)),
    status: workflow.status.name,
    volumeId: attributes.get(VolumeIdKey) ?? null,
    volumeName: attributes.get(VolumeNameKey) ?? null,
    nodeId: attributes.get(NodeIdKey) ?? null,
    phase: attributes.get(PhaseKey) ?? null,
    startTime: workflow.startTime,
    closeTime: workflow.closeTime ?? null,
    waitingSince: attributes.get(WaitingSinceKey) ?? null,
  };
}
