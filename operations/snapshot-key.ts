/**
 * The pool key of a new snapshot: random, chosen by the controller whose start created the name's create run, and
 * kept in that run's input (its history), as a volume's key is kept by its run. Every retry of the run's node
 * activity asks the node for the same key, so the node's create stays idempotent by key; a start that attaches to a
 * running run has its key dropped with the rest of its arguments. A re-create after a deletion is a new run, so a
 * new key and a new ID: a snapshot ID names one copy only, and a deletion of it never stands for another copy.
 */
import { randomUUID } from 'node:crypto';

export function newSnapshotKey(): string {
  return randomUUID().replace(/-/g, '');
}
