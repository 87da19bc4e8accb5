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

/** The single registry workflow of earlier releases (deprecated; see workflows/node-registry.ts). */
export function registryWorkflowId(driverName: string): string {
  return `${driverName}/registry`;
}

/** One long-lived record per node (workflows/node-presence.ts): no workflow hears from every node. */
export function nodeRecordWorkflowId(driverName: string, nodeId: string): string {
  return `${driverName}/node-record/${nodeId}`;
}

export const TOPOLOGY_NODE_KEY = 'topology.durable-csi.io/node';

/** The CSI driver name used when --driver-name is not given. */
export const DEFAULT_DRIVER_NAME = 'durable-csi.io';

/** Long-lived node records (and the single registry of earlier releases): running by design, never "pending". */
export const NODE_RECORD_WORKFLOW_TYPES: readonly string[] = ['nodePresence', 'nodeRegistry'];
