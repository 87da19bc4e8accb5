import type { NodeView } from '../common/registry-types';

/** The message an operator sees while a deletion waits: which node, and for how long. */
export function describeWait(volumeId: string, node: NodeView, started: Date, now: Date): string {
  const waited = formatDuration(now.getTime() - started.getTime());
  const state = node.live
    ? 'is live; the deletion is running'
    : `is offline (last heartbeat ${new Date(node.lastHeartbeat).toISOString()})`;
  return `deletion of ${volumeId} has waited ${waited} for node ${node.nodeId}, which ${state}; it completes when the node returns`;
}

export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${seconds % 60}s`;
  const hours = Math.floor(minutes / 60);
  return `${hours}h${minutes % 60}m`;
}
