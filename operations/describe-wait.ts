import type { NodeView } from '../common/registry-types';

/** The message an operator sees while a deletion waits: which node, for how long, and when it was last heard. */
export function describeWait(operation: string, volumeId: string, node: NodeView, started: Date, now: Date): string {
  const waited = formatDuration(now.getTime() - started.getTime());
  const heard = formatDuration(now.getTime() - node.lastHeartbeat);
  const state = node.live ? '' : ', considered offline';
  return (
    `${operation} of ${volumeId} has waited ${waited} for node ${node.nodeId} (last heartbeat ${heard} ago${state}); ` +
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
