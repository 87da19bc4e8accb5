/**
 * The pool key of a snapshot, derived from what the CO sends rather than chosen at random: every controller replica
 * and every retry of one CreateSnapshot asks the node for the same key, so the node's create is idempotent by key
 * even before a workflow has recorded anything. The source volume ID is part of it: the same name asked of another
 * volume is another key, which the node and the workflow answer ALREADY_EXISTS.
 */
import { createHash } from 'node:crypto';

export function snapshotKeyOf(name: string, sourceVolumeId: string): string {
  return createHash('sha256').update(`${name}\u0000${sourceVolumeId}`).digest('hex').slice(0, 32);
}
