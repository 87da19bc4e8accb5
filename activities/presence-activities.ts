import { ApplicationFailure, Context } from '@temporalio/activity';
import {
  presenceHeartbeatEveryMs,
  PRESENCE_HEARTBEAT_TIMEOUT_MS,
  type NodeReport,
  type TransferEndpoint,
} from '../common/names';
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
  /** --presence-timeout, reported so that the record holds presence with it. */
  presenceTimeoutMs: number;
  /** Where this agent serves moves' copies and its key for them (--transfer-port); absent: it serves none. */
  transfer?: TransferEndpoint;
  /** Resolves when the agent starts stopping. */
  leaving: Promise<void>;
  /** The record stopped hearing us (terminated, reset or timed out): make sure one runs again. */
  onRecordLost(): void;
}

/**
 * How often the hold reads the pool's figures (a local read: no RPC): a change is heartbeated at once (the SDK's
 * throttle, agent/worker-options.ts, sends it within 10 s of the one before).
 */
const FIGURES_EVERY_MS = 10_000;
/** A timer may fire a little before Date.now() says it is due: a heartbeat due within this is sent. */
const TIMER_SLACK_MS = 1_000;

function sameFigures(a: NodeReport, b: NodeReport): boolean {
  return (
    a.poolId === b.poolId &&
    a.capacityBytes === b.capacityBytes &&
    a.availableBytes === b.availableBytes &&
    a.volumeCount === b.volumeCount &&
    a.snapshotCount === b.snapshotCount
  );
}

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
      presenceTimeoutMs: deps.presenceTimeoutMs,
      // Only a grown payload: the record keeps what the report holds, with the same commands (no patch needed).
      ...(deps.transfer ? { transfer: deps.transfer } : {}),
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
      // The cadence follows the timeout the record scheduled this hold with, not this agent's flag: during a
      // rollout a record run started before 0.3.0 (30 s) may hold a new agent, and the flag may have changed since
      // the report the record used. The heartbeats carry the pool's figures, so readers see them this fresh.
      const everyMs = presenceHeartbeatEveryMs(context.info.heartbeatTimeoutMs || PRESENCE_HEARTBEAT_TIMEOUT_MS);
      const until = Date.now() + HOLD_FOR_MS;
      let sent: NodeReport | undefined;
      let dueAt = 0;
      for (;;) {
        const report = await currentReport();
        if (leaving || Date.now() >= until) return { report, leaving };
        // Due, or the pool's figures changed: placement reads them from the last heartbeat, so a create or delete
        // shows within FIGURES_EVERY_MS as it did before 0.3.0, while an idle node heartbeats only when due.
        if (!sent || Date.now() >= dueAt - TIMER_SLACK_MS || !sameFigures(sent, report)) {
          context.heartbeat(report);
          // The hold's first interval is cut short at random: agents that started together (a cold start of a
          // cluster, a control plane back) would otherwise heartbeat in step, every node in the same second.
          dueAt = Date.now() + (sent ? everyMs : everyMs * (0.5 + 0.5 * Math.random()));
          sent = report;
        }
        const wait = Math.max(0, Math.min(FIGURES_EVERY_MS, dueAt - Date.now()));
        try {
          await Promise.race([context.sleep(wait), deps.leaving]);
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
