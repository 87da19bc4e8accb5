import type { Client } from '@temporalio/client';
import type { Logger } from '../common/logger';
import { nodeRecordStart } from '../common/names';
import type { nodePresence } from '../workflows/node-presence';

/**
 * Keeps this node's record running (workflows/node-presence.ts). The record drives itself through the presence
 * activities this agent serves; the agent only makes sure one exists: at start, whenever its presence activity
 * is cancelled because the server no longer knows it (record terminated or reset: noticed at the hold's next
 * heartbeat), and every ten minutes in case a record was lost while no hold was running (a start is one RPC per node:
 * every two minutes, as before 0.3.0, it was a twentieth of an idle node's traffic). Starting is idempotent
 * (USE_EXISTING), so replicas of nothing race.
 */
const RECHECK_MS = 10 * 60_000;
const RETRY_MS = 5_000;

export interface Presence {
  /** True once the record is known to run (it turns the node live as soon as a controller runs it). */
  registered(): boolean;
  /** Ask for the record again now (after the presence activity was cancelled by the server). */
  recordLost(): void;
  /** Resolves when the agent starts stopping: the held presence activity returns "leaving". */
  readonly leaving: Promise<void>;
  stop(): void;
}

export function startPresence(deps: { client: Client; driverName: string; nodeId: string; logger: Logger }): Presence {
  let registered = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let markLeaving: () => void = () => undefined;
  const leaving = new Promise<void>((resolve) => (markLeaving = resolve));

  const ensure = async () => {
    await deps.client.workflow.start<typeof nodePresence>('nodePresence', {
      ...nodeRecordStart(deps.driverName, deps.nodeId),
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
  };
  const schedule = (ms: number) => {
    if (stopped) return;
    clearTimeout(timer);
    timer = setTimeout(tick, ms);
  };
  const tick = () => {
    ensure()
      .then(() => {
        registered = true;
        schedule(RECHECK_MS);
      })
      .catch((error: unknown) => {
        deps.logger.warn({ err: error }, 'node record could not be started; will retry');
        schedule(RETRY_MS);
      });
  };
  tick();
  return {
    registered: () => registered,
    recordLost: () => schedule(0),
    leaving,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
      markLeaving();
    },
  };
}
