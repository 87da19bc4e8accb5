import { parseDuration } from '../common/duration';
import { DriverError, FailureType } from '../common/failures';

/**
 * What the controller does when a Kubernetes Node that holds durable-csi volumes or pending operations is
 * deleted (`--node-deleted`): `wait` for its node agent to come back (or for an operator's `durable-csi nodes
 * forget`), or `forget-after:DURATION`, the same decision taken automatically once the Node has stayed away.
 */
export type NodeDeletedPolicy = { kind: 'wait' } | { kind: 'forget-after'; afterMs: number };

export function parseNodeDeletedPolicy(text: string): NodeDeletedPolicy {
  if (text === 'wait') return { kind: 'wait' };
  const match = /^forget-after:(.+)$/.exec(text);
  if (match) {
    try {
      return { kind: 'forget-after', afterMs: parseDuration(match[1] ?? '') };
    } catch {
      // Reported below with the whole flag.
    }
  }
  throw new DriverError(
    FailureType.InvalidArgument,
    `--node-deleted "${text}" is not a policy; use wait or forget-after:DURATION (e.g. forget-after:30m)`,
  );
}

export function formatNodeDeletedPolicy(policy: NodeDeletedPolicy): string {
  return policy.kind === 'wait' ? 'wait' : `forget-after:${Math.round(policy.afterMs / 1000)}s`;
}
