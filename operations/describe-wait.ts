import type { NodeRecordView } from '../node-records/reads';

/**
 * The message an operator (and the CO's events) sees while an operation waits: which node, for how long, when
 * it was last heard from, and for a node with no record how to end the wait.
 */
export function describeWait(
  operation: string,
  volumeId: string,
  nodeId: string,
  record: NodeRecordView | undefined,
  started: Date,
  now: Date,
): string {
  const waited = formatDuration(now.getTime() - started.getTime());
  const node = record?.node;
  if (!node) {
    return (
      `${operation} of ${volumeId} has waited ${waited} for node ${nodeId}, which is unknown to this driver (no ` +
      'agent has registered it, or its record was lost); it completes when the node agent runs it. If the node ' +
      `is gone for good: durable-csi nodes forget ${nodeId} --reason "..."`
    );
  }
  const heard = formatDuration(now.getTime() - node.lastHeartbeat);
  const state = node.live ? '' : ', considered offline';
  return (
    `${operation} of ${volumeId} has waited ${waited} for node ${nodeId} (last heartbeat ${heard} ago${state}); ` +
    'it completes when the node agent runs it'
  );
}

export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${seconds % 60}s`;
  const hours = Math.floor(minutes / 60);
  return `${hours}h${minutes % 60}m`;
}
