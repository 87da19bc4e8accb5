/**
 * Every Temporal name the driver uses, prefixed by the CSI driver name so that several drivers (or test runs)
 * can share one namespace without seeing each other's work. No Node built-ins: workflow code imports this.
 */
export function controlTaskQueue(driverName: string): string {
  return `${driverName}/control`;
}

/** Carries activities only: the node agent runs no workflow code. */
export function nodeTaskQueue(driverName: string, nodeId: string): string {
  return `${driverName}/node/${nodeId}`;
}

export function createWorkflowId(driverName: string, volumeName: string): string {
  return `${driverName}/create/${volumeName}`;
}

export function deleteWorkflowId(driverName: string, volumeId: string): string {
  return `${driverName}/delete/${volumeId}`;
}

/** One per CSI snapshot name: a retry, from any replica, attaches; the name with another source is ALREADY_EXISTS. */
export function createSnapshotWorkflowId(driverName: string, snapshotName: string): string {
  return `${driverName}/snapshot/${snapshotName}`;
}

export function deleteSnapshotWorkflowId(driverName: string, snapshotId: string): string {
  return `${driverName}/delete-snapshot/${snapshotId}`;
}

/** One listing of snapshots; `runTag` keeps concurrent listings apart (see oneOffTag). */
export function listSnapshotsWorkflowId(driverName: string, runTag: string): string {
  return `${driverName}/list-snapshots/${runTag}`;
}

/** One workflow per target size: a later, larger request is a new operation, a retry attaches. */
export function expandWorkflowId(driverName: string, volumeId: string, capacityBytes: number): string {
  return `${driverName}/expand/${volumeId}/${capacityBytes}`;
}

/** A one-off read of a volume on its node; `runTag` keeps concurrent reads apart (see oneOffTag). */
export function inspectWorkflowId(driverName: string, volumeId: string, runTag: string): string {
  return `${driverName}/inspect/${volumeId}/${runTag}`;
}

/** One page of ListVolumes; `runTag` keeps concurrent listings apart (see oneOffTag). */
export function listWorkflowId(driverName: string, runTag: string): string {
  return `${driverName}/list/${runTag}`;
}

/**
 * A tag for the ID of a short read-only workflow nobody attaches to. Called by clients only: workflow code never
 * builds these IDs (Date.now and Math.random would be replay-safe there, but this keeps the rule simple).
 */
export function oneOffTag(): string {
  return `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

/** One long-lived record per node (workflows/node-presence.ts): no workflow hears from every node. */
export function nodeRecordWorkflowId(driverName: string, nodeId: string): string {
  return `${driverName}/node-record/${nodeId}`;
}

export const TOPOLOGY_NODE_KEY = 'topology.durable-csi.io/node';

/** The CSI driver name used when --driver-name is not given. */
export const DEFAULT_DRIVER_NAME = 'durable-csi.io';

/** Long-lived node records: running by design, never "pending". */
export const NODE_RECORD_WORKFLOW_TYPES: readonly string[] = ['nodePresence'];

/** The workflow types that are volume operations: not the node records, nor the short-lived list and inspect. */
export const OPERATION_WORKFLOW_TYPES = [
  'createVolume',
  'deleteVolume',
  'expandVolume',
  'createSnapshot',
  'deleteSnapshot',
] as const;

/** The visibility clause `WorkflowType IN (...)` selecting the volume operations. */
export function operationTypesClause(): string {
  return `WorkflowType IN (${OPERATION_WORKFLOW_TYPES.map((type) => `"${type}"`).join(', ')})`;
}
