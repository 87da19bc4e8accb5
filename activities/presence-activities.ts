import { ApplicationFailure, Context } from '@temporalio/activity';
import type { NodeReport } from '../common/names';
import type { StorageBackend } from '../storage/pool/backend';

/**
 * The node side of a node record (workflows/node-presence.ts): the agent reports its pool, then holds a
 * heartbeating activity for as long as it runs. Runs only in the node's own agent, on its own task queue.
 */
export interface PresenceHold {
  report: NodeReport;
  /** The agent is stopping: the record turns offline at once instead of after the heartbeat timeout. */
  leaving: boolean;
}

export interface PresenceDeps {
  nodeId: string;
  backend: StorageBackend;
  agentVersion: string;
  /** Resolves when the agent starts stopping. */
  leaving: Promise<void>;
  /** The record stopped hearing us (terminated, reset or timed out): make sure one runs again. */
  onRecordLost(): void;
}

/**
 * How often the hold reads the pool and heartbeats: the server sees one heartbeat per node per 10 s, a third
 * of the 30 s timeout (the agent's worker also caps the SDK's throttle at 10 s).
 */
const HEARTBEAT_EVERY_MS = 10_000;
/** A hold ends now and then so the record's memo (what visibility shows) gets a fresh report. */
const HOLD_FOR_MS = 60 * 60_000;

export function createPresenceActivities(deps: PresenceDeps) {
  const currentReport = async (): Promise<NodeReport> => {
    const status = await deps.backend.status();
    return {
      nodeId: deps.nodeId,
      poolId: status.poolId,
      backend: deps.backend.kind,
      capacityBytes: status.capacityBytes,
      availableBytes: status.availableBytes,
      volumeCount: status.volumeCount,
      snapshotCount: status.snapshotCount,
      agentVersion: deps.agentVersion,
    };
  };
  let leaving = false;
  void deps.leaving.then(() => (leaving = true));

  return {
    async reportPresence(): Promise<NodeReport> {
      // A stopping agent must not bring its record back to life: the attempt is retried, by the next agent.
      if (leaving) throw ApplicationFailure.retryable(`the agent of ${deps.nodeId} is stopping`, 'AgentStopping');
      return currentReport();
    },

    async holdPresence(): Promise<PresenceHold> {
      const context = Context.current();
      const until = Date.now() + HOLD_FOR_MS;
      for (;;) {
        const report = await currentReport();
        if (leaving || Date.now() >= until) return { report, leaving };
        context.heartbeat(report);
        try {
          await Promise.race([context.sleep(HEARTBEAT_EVERY_MS), deps.leaving]);
        } catch (error) {
          // Cancelled: the server no longer knows this activity (the record was terminated, reset or timed out
          // it), or the worker is shutting down. Either way another hold will be needed.
          if (!leaving) deps.onRecordLost();
          throw error;
        }
      }
    },
  };
}

export type PresenceActivities = ReturnType<typeof createPresenceActivities>;
