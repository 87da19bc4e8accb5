import type { V1Pod } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { ActivityNotFoundError, WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { nodeRecordWorkflowId } from '../common/names';
import { PENDING_ACTIVITY_STARTED } from '../node-records/reads';

/**
 * Offline at Kubernetes' word (issue 38, docs/scale.md "Idle cost"). A node's record shows it live while its agent
 * holds the presence activity, and offline when the hold ends: at once when the agent stops, else when the server
 * times the hold out, its heartbeat timeout after the agent's last heartbeat. That timeout is what an idle node
 * costs Temporal (one heartbeat per timeout), so deploy/ sets it long (--presence-timeout=5m), and the controller's
 * watch of the agents' Pods (--agent-pods, `startAgentPodWatch` in controller-integration.ts) says sooner what
 * kubelet already knows without any Temporal traffic: the agent's container exited, its readiness probe failed (a
 * frozen agent), its Node stopped answering (the node lifecycle controller marks its Pods not ready), its Node was
 * deleted, or its Pod was (a deleted Node's Pods, by the Pod garbage collector, while its agent may still be frozen).
 *
 * The watch then fails the record's hold by its ID (RespondActivityTaskFailedById), which the record takes as any
 * other failed hold: offline, operations waiting on the node told, its report scheduled in the node's queue. No
 * workflow code changes, so records of every release take it. It is only ever a hint towards offline, never
 * proof of anything: offline releases nothing (a deletion waits in the node's queue either way), and an agent
 * that in fact still runs answers the report at once and is live again (a flap, no false answer). Only the hold of
 * this Pod's own agent is failed (the worker identity names the Pod: agent/node-temporal.ts), so a Pod that
 * turns not ready as it stops never touches the hold of its successor.
 *
 * What it leaves to the heartbeat timeout: an agent cut off from Temporal while kubelet still sees it ready, an
 * agent that dies while the controller (or the API server) is down, and a frozen agent or lost Node the watch
 * finds already not ready when it starts (from its first listing it cannot tell them from a starting agent).
 */

/** What the watch keeps of an agent Pod between two events. */
export interface AgentPodView {
  name: string;
  uid: string;
  nodeId?: string;
  /** Its Ready condition is True. */
  ready: boolean;
  /** No container terminated or waiting (to start, or to restart after it exited). */
  running: boolean;
}

export function agentPodView(pod: V1Pod): AgentPodView {
  const ready = (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
  // No status yet (a Pod just made) is no container stopped: only what kubelet reports stopped counts.
  const running = (pod.status?.containerStatuses ?? []).every(
    (status) => !status.state?.terminated && !status.state?.waiting,
  );
  return { name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '', nodeId: pod.spec?.nodeName, ready, running };
}

/**
 * Why a Pod's agent is to be taken offline now, or undefined. Changes only: a Pod that stays not ready makes no more
 * events than the one that changed it. A Pod seen for the first time (the watch's first listing, or a new Pod) counts
 * only when a container is not running: a starting Pod is not ready yet while its agent already holds presence,
 * and a frozen agent or a lost Node found at the controller's start is left to the heartbeat timeout.
 */
export function notReadyReason(before: AgentPodView | undefined, now: AgentPodView): string | undefined {
  if (!now.nodeId) return undefined;
  const same = before?.uid === now.uid ? before : undefined;
  if (!now.running && (same === undefined || same.running)) return 'a container of the Pod is not running';
  if (same?.ready && !now.ready) return 'the Pod turned not ready';
  return undefined;
}

/** Why, when the Pod itself is deleted (its Node deleted, a force delete): its agent may still hold presence. */
export const POD_DELETED = 'the Pod was deleted';
/** Why, when its Node is deleted (its Pods are deleted only later): its agent may still hold presence. */
export const NODE_DELETED = 'its Node was deleted';

export type HoldOutcome = 'failed' | 'no record' | 'not held by this Pod';

/**
 * Fails the presence hold of the node's record if this Pod's agent holds it; what was found otherwise. A hold of
 * another agent (a successor, an agent outside Kubernetes) and a hold not started yet are left alone.
 */
export async function failHoldOfPod(
  client: Client,
  driverName: string,
  pod: { name: string; namespace: string; nodeId: string },
  why: string,
): Promise<HoldOutcome> {
  const workflowId = nodeRecordWorkflowId(driverName, pod.nodeId);
  let description;
  try {
    description = await client.workflow.getHandle(workflowId).describe();
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return 'no record';
    throw error;
  }
  if (description.status.name !== 'RUNNING') return 'no record';
  const holds = (description.raw.pendingActivities ?? []).filter(
    (activity) =>
      activity.activityType?.name === 'holdPresence' &&
      activity.state === PENDING_ACTIVITY_STARTED &&
      activity.lastWorkerIdentity?.endsWith(`@${pod.name}`),
  );
  let failed = false;
  for (const hold of holds) {
    const message =
      `Kubernetes reports the agent of node ${pod.nodeId} (Pod ${pod.namespace}/${pod.name}) not running or not ` +
      `ready: ${why}; offline until the agent answers its report again`;
    try {
      await client.activity.fail(
        { workflowId, runId: description.runId, activityId: hold.activityId ?? '' },
        ApplicationFailure.create({ message, type: AGENT_NOT_READY, nonRetryable: true }),
      );
      failed = true;
    } catch (error) {
      if (!(error instanceof ActivityNotFoundError)) throw error; // it ended meanwhile: nothing to do
    }
  }
  return failed ? 'failed' : 'not held by this Pod';
}

/** The failure type a hold failed by the watch carries (the record's history shows it). */
export const AGENT_NOT_READY = 'AgentNotReady';
