import { Context, heartbeat, log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { byVolumeIdOrder, nodeRemains } from '../common/list-position';
import {
  nodeLivenessSignal,
  NodeIdKey,
  nodeRecordStart,
  operationTypesClause,
  writeOffVolumeSignal,
} from '../common/names';
import type { NodeView, WrittenOffVolume, LivenessNotice } from '../common/names';
import { listNodeViews } from '../node-records/reads';
import type { V1OwnerReference, V1PersistentVolumeClaimSpec, V1PersistentVolumeSpec } from '@kubernetes/client-node';
import { withFailureTypes } from './node-activities';

/**
 * What workflows ask of the controller about node records, on the control queue: the nodes a listing page asks
 * next, telling the operations waiting on a node that its liveness changed, keeping a write-off on a node's record,
 * and reporting what a returning node deleted of it. Placement is its own module (./placement.ts).
 */

/** The nodes a page of a volume listing asks next: bounded, so the list workflow's history is too. */
export interface ListNodesAnswer {
  nodes: Pick<NodeView, 'nodeId' | 'live'>[];
  /** Further reported nodes come after these. */
  more: boolean;
}

/** Written-off volumes a returning node has just deleted (or found gone), for the log and Kubernetes Events. */
export interface WrittenOffReport {
  nodeId: string;
  volumes: (WrittenOffVolume & { outcome: string })[];
}

export interface ControlDeps {
  client: Client;
  driverName: string;
  /** Set once Kubernetes is on (`--kubernetes`): records Events; never throws. */
  writtenOffEvents?: { report?(report: WrittenOffReport): Promise<void> };
  /** With `--kubernetes`: a move's switch (kubernetes/claim-switch.ts), loaded on first use. Without, a move only copies. */
  claims?: () => Promise<ClaimSwitcher>;
  /** With `--kubernetes`: a snapshot move's switch (kubernetes/snapshot-switch.ts), loaded on first use. */
  snapshots?: () => Promise<SnapshotSwitcher>;
}

/*
 * A move's switch in Kubernetes: what the workflow keeps and passes (workflows/move-volume.ts), and what the controller
 * does with it (kubernetes/claim-switch.ts, given to these activities as a ClaimSwitcher).
 */

/** The moved volume's PV and claim as they were before the move changed anything (kept in the move's history). */
export interface MovedClaim {
  pv: {
    name: string;
    uid: string;
    reclaimPolicy: string;
    labels: Record<string, string>;
    spec: V1PersistentVolumeSpec;
  };
  claim: {
    namespace: string;
    name: string;
    uid: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    ownerReferences: V1OwnerReference[];
    spec: V1PersistentVolumeClaimSpec;
  };
}

export interface SwitchInput {
  driverName: string;
  moveWorkflowId: string;
  oldVolumeId: string;
  newVolumeId: string;
  targetNodeId: string;
  newPvName: string;
  moved: MovedClaim;
}

/** kubernetes/claim-switch.ts's steps, each one pass that reads the cluster as it is (docs/volume-moves.md). */
export interface ClaimSwitcher {
  read(driverName: string, volumeId: string): Promise<MovedClaim>;
  prepare(input: SwitchInput): Promise<void>;
  /** podsReset: Pods bound to another node while the claim was away, deleted for their controllers to make again. */
  switchClaim(input: SwitchInput, heartbeat: () => void): Promise<{ claimUid: string; podsReset: string[] }>;
  retire(input: SwitchInput, heartbeat: () => void): Promise<{ podsReset: string[] }>;
  /** What could not be restored, in words (undefined: the old PV is as it was). */
  undo(input: SwitchInput): Promise<string | undefined>;
}

/** A moved snapshot's VolumeSnapshot and its content as they were before the move changed anything. */
export interface MovedSnapshot {
  snapshot: {
    namespace: string;
    name: string;
    uid: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    volumeSnapshotClassName?: string;
  };
  content: {
    name: string;
    uid: string;
    deletionPolicy: string;
    volumeSnapshotClassName?: string;
    sourceVolumeMode?: string;
  };
}

export interface SnapshotSwitchInput {
  driverName: string;
  moveWorkflowId: string;
  oldSnapshotId: string;
  newSnapshotId: string;
  targetNodeId: string;
  newContentName: string;
  moved: MovedSnapshot;
}

/** kubernetes/snapshot-switch.ts's steps, each one pass that reads the cluster as it is (docs/volume-moves.md). */
export interface SnapshotSwitcher {
  read(driverName: string, snapshotId: string): Promise<MovedSnapshot>;
  prepare(input: SnapshotSwitchInput): Promise<void>;
  switchSnapshot(input: SnapshotSwitchInput, heartbeat: () => void): Promise<{ snapshotUid: string }>;
  retire(input: SnapshotSwitchInput, heartbeat: () => void): Promise<void>;
  /** What could not be restored, in words (undefined: the old content is as it was). */
  undo(input: SnapshotSwitchInput): Promise<string | undefined>;
}

export function createControlActivities(deps: ControlDeps) {
  return {
    /** The first `limit` reported nodes, in volume-ID order, that may hold a volume after the position. */
    async readNodesAfter(input: { after: string; limit: number }): Promise<ListNodesAnswer> {
      return reportedNodesAfter(deps, input);
    },

    /** Tells every operation waiting on the node that its liveness changed (their phase follows it). */
    async announceLiveness(input: { driverName: string; nodeId: string; live: boolean }): Promise<number> {
      return tellWaitingOperations(deps.client, input);
    },

    /**
     * Keeps a written-off volume on its node's record, to be deleted when the node returns. Starts the record if
     * it was lost (it then waits for the node like any record), so the note survives whatever happened to it.
     */
    async recordWriteOff(input: { driverName: string; nodeId: string; volume: WrittenOffVolume }): Promise<void> {
      await noteWriteOffOnRecord(deps.client, input);
    },

    /*
     * A move's switch in Kubernetes (workflows/move-volume.ts, kubernetes/claim-switch.ts). Without --kubernetes
     * the first answers undefined: the move copies, and the CO keeps the source volume.
     */

    async readMovedClaim(input: { driverName: string; volumeId: string }): Promise<MovedClaim | undefined> {
      if (!deps.claims) return undefined;
      const claims = await deps.claims();
      return withFailureTypes(() => claims.read(input.driverName, input.volumeId));
    },

    async prepareMovedSwitch(input: SwitchInput): Promise<void> {
      const claims = await claimsFor(deps);
      await withFailureTypes(() => claims.prepare(input));
    },

    async switchMovedClaim(input: SwitchInput): Promise<{ claimUid: string }> {
      const claims = await claimsFor(deps);
      const { claimUid, podsReset } = await withFailureTypes(() => claims.switchClaim(input, beatOrStop));
      log.info('moved claim switched', { claim: `${input.moved.claim.namespace}/${input.moved.claim.name}` });
      logPodsReset(input, podsReset);
      return { claimUid };
    },

    async retireMovedPv(input: SwitchInput): Promise<void> {
      const claims = await claimsFor(deps);
      const { podsReset } = await withFailureTypes(() => claims.retire(input, beatOrStop));
      logPodsReset(input, podsReset);
    },

    /** What could not be restored, in words (undefined: the old PV is as it was). */
    async undoMovedSwitch(input: SwitchInput): Promise<string | undefined> {
      const claims = await claimsFor(deps);
      return withFailureTypes(() => claims.undo(input));
    },

    /* A snapshot's move (workflows/move-volume.ts moveSnapshot): the VolumeSnapshot made again, naming the copy. */

    async readMovedSnapshot(input: { driverName: string; snapshotId: string }): Promise<MovedSnapshot | undefined> {
      if (!deps.snapshots) return undefined;
      const snapshots = await deps.snapshots();
      return withFailureTypes(() => snapshots.read(input.driverName, input.snapshotId));
    },

    async prepareSnapshotSwitch(input: SnapshotSwitchInput): Promise<void> {
      const snapshots = await snapshotsFor(deps);
      await withFailureTypes(() => snapshots.prepare(input));
    },

    async switchMovedSnapshot(input: SnapshotSwitchInput): Promise<{ snapshotUid: string }> {
      const snapshots = await snapshotsFor(deps);
      const switched = await withFailureTypes(() => snapshots.switchSnapshot(input, beatOrStop));
      const { namespace, name } = input.moved.snapshot;
      log.info('moved VolumeSnapshot switched', { snapshot: `${namespace}/${name}`, content: input.newContentName });
      return switched;
    },

    async retireMovedSnapshotContent(input: SnapshotSwitchInput): Promise<void> {
      const snapshots = await snapshotsFor(deps);
      await withFailureTypes(() => snapshots.retire(input, beatOrStop));
    },

    /** What could not be restored, in words (undefined: the old content is as it was). */
    async undoSnapshotSwitch(input: SnapshotSwitchInput): Promise<string | undefined> {
      const snapshots = await snapshotsFor(deps);
      return withFailureTypes(() => snapshots.undo(input));
    },

    async reportWrittenOffDeleted(input: WrittenOffReport & { driverName: string }): Promise<void> {
      for (const volume of input.volumes)
        log.warn('a volume written off while its node was forgotten was deleted on the returning node', {
          nodeId: input.nodeId,
          volumeId: volume.volumeId,
          outcome: volume.outcome,
          reason: volume.reason,
        });
      await deps.writtenOffEvents?.report?.(input);
    },
  };
}

export type ControlActivities = ReturnType<typeof createControlActivities>;

/** The switch's heartbeat: it stops at the next step once the move is cancelled (the activity then ends cancelled). */
function beatOrStop(): void {
  heartbeat();
  Context.current().cancellationSignal.throwIfAborted();
}

/** A move that began with Kubernetes needs it to end: a controller restarted without --kubernetes keeps it waiting. */
function claimsFor(deps: ControlDeps): Promise<ClaimSwitcher> {
  if (!deps.claims)
    throw new Error('this move switches a claim in Kubernetes, and the controller runs without --kubernetes');
  return deps.claims();
}

function snapshotsFor(deps: ControlDeps): Promise<SnapshotSwitcher> {
  if (!deps.snapshots)
    throw new Error('this move switches a VolumeSnapshot in Kubernetes, and the controller runs without --kubernetes');
  return deps.snapshots();
}

async function reportedNodesAfter(
  deps: ControlDeps,
  input: { after: string; limit: number },
): Promise<ListNodesAnswer> {
  const remaining = (await listNodeViews(deps.client, deps.driverName))
    .filter((node) => nodeRemains(node.nodeId, input.after))
    .sort((a, b) => byVolumeIdOrder(a.nodeId, b.nodeId));
  const nodes = remaining.slice(0, input.limit).map((node) => ({ nodeId: node.nodeId, live: node.live }));
  return { nodes, more: remaining.length > nodes.length };
}

/** Signals every running operation of the driver waiting on the node; returns how many heard it. */
async function tellWaitingOperations(
  client: Client,
  input: { driverName: string; nodeId: string; live: boolean },
): Promise<number> {
  const notice: LivenessNotice = { nodeId: input.nodeId, live: input.live, at: new Date().toISOString() };
  const query = [
    `WorkflowId STARTS_WITH "${input.driverName}/"`,
    operationTypesClause(),
    'ExecutionStatus = "Running"',
    `${NodeIdKey.name} = "${input.nodeId}"`,
  ].join(' AND ');
  let told = 0;
  for await (const workflow of client.workflow.list({ query })) {
    await client.workflow
      .getHandle(workflow.workflowId, workflow.runId)
      .signal(nodeLivenessSignal, notice)
      .then(() => told++)
      .catch(() => undefined); // it finished meanwhile
  }
  return told;
}

function logPodsReset(input: SwitchInput, pods: string[]): void {
  for (const pod of pods) {
    log.warn(
      'a Pod bound to another node than the copy while the switch had its claim away was deleted: its controller makes it again where the data is',
      {
        pod,
        claim: `${input.moved.claim.namespace}/${input.moved.claim.name}`,
        target: input.targetNodeId,
      },
    );
  }
}

/** signalWithStart of the node's record, started as an offline record when there is none. */
async function noteWriteOffOnRecord(
  client: Client,
  input: { driverName: string; nodeId: string; volume: WrittenOffVolume },
): Promise<void> {
  await client.workflow.signalWithStart('nodePresence', {
    ...nodeRecordStart(input.driverName, input.nodeId),
    signal: writeOffVolumeSignal,
    signalArgs: [input.volume],
  });
}
