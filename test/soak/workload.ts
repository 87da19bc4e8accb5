import * as grpc from '@grpc/grpc-js';
import { call, withDeadline } from '../../csi/client';
import { parseEndpoint } from '../../csi/endpoint';
import type { ControllerClient } from '../../csi/generated/csi/v1/Controller';
import type { CreateSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateSnapshotResponse';
import type { CreateVolumeGroupSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateVolumeGroupSnapshotResponse';
import type { CreateVolumeResponse__Output } from '../../csi/generated/csi/v1/CreateVolumeResponse';
import type { GetVolumeGroupSnapshotResponse__Output } from '../../csi/generated/csi/v1/GetVolumeGroupSnapshotResponse';
import type { GroupControllerClient } from '../../csi/generated/csi/v1/GroupController';
import { csiPackage } from '../../csi/proto';
import { TOPOLOGY_NODE_KEY } from '../../common/names';
import { createRequest } from '../support/csi-requests';
import type { GroupState, Model, NameState, OpRecord, SnapshotState } from './model';
import type { Prng } from './prng';

/**
 * What a CO retries: the call may still succeed. NOT_READY: a CreateSnapshot answered OK but not ready_to_use (the
 * sidecar asks again; builds since f05f05b never answer so, a baseline may).
 */
const RETRIABLE = new Set(['ABORTED', 'UNAVAILABLE', 'DEADLINE_EXCEEDED', 'NOT_READY']);
/** About this share of background operations are snapshot ones (create, restore, delete). */
const SNAPSHOT_SHARE = 0.13;
/** Of those, about this share re-create a deleted snapshot's name (when there is one whose source still exists). */
const RESNAPSHOT_SHARE = 0.25;

/**
 * About this share of background operations are group snapshot ones (CreateVolumeGroupSnapshot of 2 or 3 volumes of
 * one node, a re-create of a deleted group's name, DeleteVolumeGroupSnapshot, GetVolumeGroupSnapshot of a group held
 * or deleted, a restore from a member).
 */
const GROUP_SHARE = 0.08;

/** A CreateSnapshot answer that gives the CO no snapshot yet: asked again, like UNAVAILABLE. */
class RetryLater extends Error {
  constructor(
    readonly label: string,
    message: string,
  ) {
    super(message);
  }
}
/** An unexpected answer is retried too (the PVC or PV is still there), but only this many times. */
const MAX_UNEXPECTED = 5;

export interface ControllerTarget {
  name: string;
  client: ControllerClient;
  /**
   * Whether the build the controller runs now serves snapshots (`--snapshots` in its `controller --help`); absent:
   * yes. Snapshot calls and restores go only to controllers that do (a version-skew baseline may not).
   */
  snapshots?: () => boolean;
  /** The GroupController on the same socket. */
  group: GroupControllerClient;
  /**
   * Whether the build the controller runs now serves the GroupController; absent: yes. Group calls go only to
   * controllers that do: 0.2.0 has none, and answers them UNIMPLEMENTED (faults/version-skew.ts shows it).
   */
  groups?: () => boolean;
}

export interface UnexpectedAnswer {
  at: string;
  op: number;
  kind: string;
  code: string;
  message: string;
}

export interface WorkloadConfig {
  ops: number;
  concurrency: number;
  callTimeoutMs: number;
  opBudgetMs: number;
  nodes: string[];
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A channel that redials quickly: a restarted controller must not look down for the default 2-minute backoff. */
export function connectController(
  name: string,
  endpoint: string,
  snapshots?: () => boolean,
  groups?: () => boolean,
): ControllerTarget & { close(): void } {
  const { address } = parseEndpoint(endpoint);
  const options = {
    'grpc.initial_reconnect_backoff_ms': 100,
    'grpc.min_reconnect_backoff_ms': 100,
    'grpc.max_reconnect_backoff_ms': 1000,
  };
  const client = new (csiPackage().Controller)(address, grpc.credentials.createInsecure(), options);
  const group = new (csiPackage().GroupController)(address, grpc.credentials.createInsecure(), options);
  return {
    name,
    client,
    snapshots,
    group,
    groups,
    close: () => {
      client.close();
      group.close();
    },
  };
}

/** Which controllers an operation may go to: any, those serving snapshots, those serving the GroupController. */
type Needs = 'snapshots' | 'groups' | undefined;

function codeOf(error: unknown): { code: string; message: string } {
  if (error instanceof RetryLater) return { code: error.label, message: error.message };
  const code = (error as grpc.ServiceError).code;
  const message = error instanceof Error ? error.message : String(error);
  return { code: typeof code === 'number' ? (grpc.status[code] ?? String(code)) : 'NO_CODE', message };
}

/**
 * The orchestrator: a seeded stream of CreateVolume and DeleteVolume through either controller, each retried like
 * external-provisioner does. A background operation holds one of `concurrency` slots for at most opBudgetMs, then
 * keeps retrying on its own (slower), so deletions waiting for a dead node pile up without stalling the stream.
 */
export class Workload {
  issued = 0;
  /** How many operations the background stream may have issued so far; the fault schedule raises it. */
  allowance = 0;
  readonly unexpected: UnexpectedAnswer[] = [];
  private readonly running = new Map<number, Promise<void>>();
  private hardDeadline = Infinity;
  private stopping = false;
  private readonly attemptRng: Prng;

  constructor(
    readonly model: Model,
    private readonly prng: Prng,
    private readonly controllers: ControllerTarget[],
    private readonly config: WorkloadConfig,
  ) {
    this.attemptRng = prng.fork();
  }

  /** Runs the background stream until `ops` operations were issued (by it and by the faults). */
  async background(): Promise<void> {
    const loop = async () => {
      while (this.issued < this.config.ops && !this.stopping) {
        const op = this.issued < this.allowance ? this.nextBackgroundOp() : undefined;
        if (!op) {
          await sleep(200);
          continue;
        }
        await Promise.race([this.running.get(op.id), sleep(this.config.opBudgetMs)]);
        await sleep(this.prng.int(0, 300));
      }
    };
    await Promise.all(Array.from({ length: this.config.concurrency }, loop));
  }

  stopBackground(): void {
    this.stopping = true;
  }

  private nextBackgroundOp(): OpRecord | undefined {
    if (this.prng.chance(GROUP_SHARE)) {
      const op = this.groupOp('background');
      if (op) return op;
    }
    if (this.prng.chance(SNAPSHOT_SHARE)) {
      const op = this.snapshotOp('background');
      if (op) return op;
    }
    const present = this.model.presentCount();
    const deleteShare = present > 40 ? 0.6 : present > 8 ? 0.45 : 0.3;
    if (this.prng.chance(deleteShare)) {
      const op = this.deleteOne('background');
      if (op) return op;
    }
    const prefer = this.prng.chance(0.2) ? this.prng.pick(this.config.nodes) : undefined;
    return this.create('background', { prefer });
  }

  /** A CreateVolume of a recurring name that has no volume now (a re-create), or else of a new name. */
  create(origin: string, options: { prefer?: string; via?: number } = {}): OpRecord {
    const recurring = this.prng.chance(0.35) ? this.model.idleRecurring((items) => this.prng.pick(items)) : undefined;
    const state = recurring ?? this.model.newUnique(this.model.randomSize(() => this.prng.next()));
    state.busy = true;
    const op = this.model.newOp('create', state.name, origin, options.prefer ? { node: options.prefer } : {});
    this.launchCreate(op, state, options.via);
    void this.running.get(op.id)?.then(() => (state.busy = false));
    return op;
  }

  /**
   * A CreateVolume of the name a deletion in flight removes, with the same request: what external-provisioner does
   * when saving the PV failed after the create (it deletes the volume, then retries the name). The name stays busy
   * until both have ended.
   */
  recreate(origin: string, deletion: OpRecord): OpRecord {
    const state = this.model.state(deletion.name);
    state.supersedes = deletion.volumeId;
    const op = this.model.newOp('create', state.name, origin, deletion.node ? { node: deletion.node } : {});
    this.launchCreate(op, state, undefined);
    void this.done(deletion).then(() => (state.busy = op.endedAt === undefined));
    void this.done(op).then(() => (state.busy = deletion.endedAt === undefined));
    return op;
  }

  /** A DeleteVolume of an existing volume with nothing in flight, on `node` if given; undefined when none. */
  deleteOne(origin: string, options: { node?: string; via?: number } = {}): OpRecord | undefined {
    const candidates = this.model.idleVolumes(options.node);
    if (candidates.length === 0) return undefined;
    const state = this.prng.pick(candidates);
    const volumeId = state.volumeId as string;
    state.busy = true;
    const op = this.model.newOp('delete', state.name, origin, { volumeId, node: volumeId.split('_')[1] });
    this.launch(op, options.via, async (client) => {
      await call<object>((done) =>
        client.DeleteVolume({ volume_id: volumeId }, withDeadline(this.config.callTimeoutMs), done),
      );
      this.model.deleted(op);
    });
    void this.running.get(op.id)?.then(() => (state.busy = false));
    return op;
  }

  /**
   * One snapshot operation of the mix: CreateSnapshot of an idle volume, a restore (CreateVolume from an idle
   * snapshot) or DeleteSnapshot; more deletions the more snapshots exist. Undefined when none is possible.
   */
  snapshotOp(origin: string, options: { node?: string } = {}): OpRecord | undefined {
    // Names used again: a deleted snapshot's name and source asked for once more (issue 33).
    if (options.node === undefined && this.prng.chance(RESNAPSHOT_SHARE)) {
      const op = this.resnapshotOne(origin);
      if (op) return op;
    }
    const count = this.model.snapshotCount();
    const roll = this.prng.next();
    const deleteShare = count > 12 ? 0.55 : count > 4 ? 0.35 : 0.2;
    const order =
      roll < deleteShare
        ? ['delete', 'create', 'restore']
        : roll < deleteShare + 0.3
          ? ['restore', 'create', 'delete']
          : ['create', 'restore', 'delete'];
    for (const what of order) {
      const op =
        what === 'create'
          ? this.snapshotOne(origin, options)
          : what === 'restore'
            ? this.restoreOne(origin, options)
            : this.deleteSnapshotOne(origin, options);
      if (op) return op;
    }
    return undefined;
  }

  /**
   * CreateSnapshot (a new name) of an existing volume with nothing in flight, on `node` if given, retried until it
   * answers ready (ABORTED while the copy is not recorded). The volume is busy meanwhile: snapshot-controller keeps a
   * source PVC from deletion while its snapshot is being made. Afterwards the volume may go; the copy stays.
   * `source`: this volume (the caller holds it); `hold`: source and snapshot stay busy until the caller frees them.
   */
  snapshotOne(
    origin: string,
    options: { node?: string; via?: number; source?: NameState; hold?: boolean } = {},
  ): OpRecord | undefined {
    const candidates = options.source ? [options.source] : this.model.idleVolumes(options.node);
    if (candidates.length === 0) return undefined;
    const source = this.prng.pick(candidates);
    const snapshot = this.model.newSnapshot(source);
    source.busy = true;
    snapshot.busy = true;
    const op = this.model.newOp('snapshot', snapshot.name, origin, {
      volumeId: snapshot.sourceVolumeId,
      node: snapshot.node,
    });
    this.launchSnapshot(op, snapshot, options.via);
    void this.running.get(op.id)?.then(() => {
      if (options.hold) return;
      source.busy = false;
      snapshot.busy = false;
    });
    return op;
  }

  /**
   * CreateSnapshot of a name (and source) whose snapshot was deleted: it must be a new snapshot, which the earlier
   * deletion does not remove (issue 33). The source is busy meanwhile, as for any CreateSnapshot.
   */
  resnapshotOne(origin: string): OpRecord | undefined {
    const candidates = this.model.recreatableSnapshots();
    if (candidates.length === 0) return undefined;
    const snapshot = this.prng.pick(candidates);
    const source = this.model.state(snapshot.sourceName);
    source.busy = true;
    snapshot.busy = true;
    const op = this.model.newOp('snapshot', snapshot.name, origin, {
      volumeId: snapshot.sourceVolumeId,
      node: snapshot.node,
      recreate: true,
    });
    this.launchSnapshot(op, snapshot, undefined);
    void this.running.get(op.id)?.then(() => {
      source.busy = false;
      snapshot.busy = false;
    });
    return op;
  }

  /**
   * CreateSnapshot of the name (and source) a DeleteSnapshot in flight removes: it must answer a retriable error
   * until that deletion has ended, then a new snapshot, never the ID being deleted (issue 33). The name and its
   * source stay busy until both have ended; the caller reserved the source (busy) before the deletion.
   */
  resnapshot(origin: string, deletion: OpRecord): OpRecord {
    const snapshot = this.model.snapshotState(deletion.name);
    const source = this.model.state(snapshot.sourceName);
    snapshot.supersedes = deletion.snapshotId;
    const op = this.model.newOp('snapshot', snapshot.name, origin, {
      volumeId: snapshot.sourceVolumeId,
      node: snapshot.node,
      recreate: true,
    });
    this.launchSnapshot(op, snapshot, undefined);
    const release = () => {
      const both = op.endedAt !== undefined && deletion.endedAt !== undefined;
      snapshot.busy = !both;
      source.busy = !both;
    };
    void this.done(deletion).then(release);
    void this.done(op).then(release);
    return op;
  }

  /**
   * Snapshots of `count` idle volumes on `node`, made now and waited for (bounded). Each one's source stays held
   * (busy) for a re-create of the name: resnapshot, or releaseSnapshotDeletion, frees it.
   */
  async snapshotsForRecreate(
    node: string,
    count: number,
    origin: string,
    timeoutMs = 60_000,
  ): Promise<SnapshotState[]> {
    await this.ensureOn(node, count, origin, timeoutMs);
    const ops = Array.from({ length: count }, () => this.snapshotOne(origin, { node })).flatMap((op) =>
      op ? [op] : [],
    );
    await Promise.race([Promise.all(ops.map((op) => this.done(op))), sleep(timeoutMs)]);
    // In the same turn as the snapshots' own release: no background operation takes a source in between.
    return ops.flatMap((op) => {
      if (op.outcome !== 'ok' || op.snapshotId === undefined) return [];
      const snapshot = this.model.snapshotState(op.name);
      if (snapshot.busy || snapshot.snapshotId !== op.snapshotId) return [];
      this.model.state(snapshot.sourceName).busy = true;
      return [snapshot];
    });
  }

  /** DeleteSnapshot of a snapshot from snapshotsForRecreate: the name stays busy until its re-create ends too. */
  deleteSnapshotForRecreate(snapshot: SnapshotState, origin: string): OpRecord {
    return this.launchSnapshotDelete(snapshot, origin, undefined, false);
  }

  /** Sends a CreateSnapshot (retried until ready) and records its answer in the model. */
  private launchSnapshot(op: OpRecord, snapshot: SnapshotState, via: number | undefined): void {
    this.launch(
      op,
      via,
      async (client) => {
        let answer: CreateSnapshotResponse__Output;
        try {
          answer = await call<CreateSnapshotResponse__Output>((done) =>
            client.CreateSnapshot(
              { name: snapshot.name, source_volume_id: snapshot.sourceVolumeId },
              withDeadline(this.config.callTimeoutMs),
              done,
            ),
          );
        } catch (error) {
          // The source's node was forgotten: NOT_FOUND, the CO has no snapshot; a copy made is written off.
          if (codeOf(error).code === 'NOT_FOUND' && this.model.forgottenSince(snapshot.node, op.startedAt)) {
            op.endedByForget = true;
            op.error = codeOf(error).message;
            return;
          }
          throw error;
        }
        const made = answer.snapshot;
        if (!made?.snapshot_id) throw new Error(`CreateSnapshot ${snapshot.name} answered without a snapshot_id`);
        if (!made.ready_to_use) throw new RetryLater('NOT_READY', `${made.snapshot_id} not ready to use`);
        op.snapshotId = made.snapshot_id;
        this.model.snapshotCreated(op, made.snapshot_id);
      },
      true,
    );
  }

  /**
   * A restore: CreateVolume of a new name from an idle snapshot (on `node` if given), the snapshot's size. The
   * snapshot is busy meanwhile (snapshot-controller's source protection); the new volume joins the model as any.
   * `snapshot`: this one (the caller holds it); `hold`: the new volume stays busy until the caller frees it.
   */
  restoreOne(
    origin: string,
    options: { node?: string; snapshot?: SnapshotState; hold?: boolean } = {},
  ): OpRecord | undefined {
    const candidates = options.snapshot ? [options.snapshot] : this.model.idleSnapshots(options.node);
    if (candidates.length === 0) return undefined;
    const snapshot = this.prng.pick(candidates);
    const snapshotId = snapshot.snapshotId as string;
    const state = this.model.newUnique(snapshot.sizeBytes);
    state.busy = true;
    snapshot.busy = true;
    const op = this.model.newOp('create', state.name, origin, { fromSnapshot: snapshotId, node: snapshot.node });
    this.launchCreate(op, state, undefined, snapshotId);
    void this.running.get(op.id)?.then(() => {
      state.busy = options.hold === true;
      snapshot.busy = false;
    });
    return op;
  }

  /** DeleteSnapshot of an idle snapshot (on `node` if given), retried while ABORTED (its node down). */
  deleteSnapshotOne(origin: string, options: { node?: string; via?: number } = {}): OpRecord | undefined {
    const candidates = this.model.idleSnapshots(options.node);
    if (candidates.length === 0) return undefined;
    return this.launchSnapshotDelete(this.prng.pick(candidates), origin, options.via, true);
  }

  /** DeleteSnapshot of the named snapshot, if the CO holds it and nothing is in flight for it. */
  deleteSnapshotOf(name: string, origin: string): OpRecord | undefined {
    const snapshot = this.model.snapshotState(name);
    if (snapshot.busy || snapshot.snapshotId === undefined) return undefined;
    return this.launchSnapshotDelete(snapshot, origin, undefined, true);
  }

  /** For a deletion from deleteSnapshotForRecreate that gets no re-create: name and source free once it ends. */
  releaseSnapshotDeletion(deletion: OpRecord): void {
    const snapshot = this.model.snapshotState(deletion.name);
    void this.done(deletion).then(() => {
      snapshot.busy = false;
      this.model.state(snapshot.sourceName).busy = false;
    });
  }

  /** DeleteSnapshot of this snapshot; the name is busy until it ends (or, with release false, until the caller says). */
  private launchSnapshotDelete(snapshot: SnapshotState, origin: string, via: number | undefined, release: boolean) {
    const snapshotId = snapshot.snapshotId as string;
    snapshot.busy = true;
    const op = this.model.newOp('snapshot-delete', snapshot.name, origin, { snapshotId, node: snapshot.node });
    this.launch(
      op,
      via,
      async (client) => {
        await call<object>((done) =>
          client.DeleteSnapshot({ snapshot_id: snapshotId }, withDeadline(this.config.callTimeoutMs), done),
        );
        this.model.snapshotDeleted(op);
      },
      true,
    );
    if (release) void this.running.get(op.id)?.then(() => (snapshot.busy = false));
    return op;
  }

  /** Makes snapshots of volumes on `node` until it holds `count` idle ones (bounded), waiting for them. */
  async ensureSnapshotsOn(node: string, count: number, origin: string, timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (let tries = 0; tries < count * 3 && Date.now() < until; tries++) {
      const missing = count - this.model.idleSnapshots(node).length;
      if (missing <= 0) return;
      if (this.model.idleVolumes(node).length === 0) await this.ensureOn(node, 1, origin, until - Date.now());
      const ops = Array.from({ length: missing }, () => this.snapshotOne(origin, { node })).flatMap((op) =>
        op ? [op] : [],
      );
      await Promise.race([Promise.all(ops.map((op) => this.done(op))), sleep(Math.max(0, until - Date.now()))]);
    }
  }

  /**
   * One group snapshot operation of the mix (docs/soak.md): a new group, a re-create of a deleted group's name and
   * volumes, a deletion, a Get of a group held or deleted, or a restore from a member; more deletions the more groups
   * exist; the first Get as soon as a group can be asked for. Undefined when none is possible.
   */
  groupOp(origin: string, options: { node?: string } = {}): OpRecord | undefined {
    const count = this.model.groupCount();
    const deleteWeight = count > 4 ? 0.35 : count > 1 ? 0.2 : 0.1;
    const weights: [string, number][] = [
      ['create', count > 4 ? 0.15 : 0.3],
      ['recreate', 0.1],
      ['delete', deleteWeight],
      ['get', 0.2],
      ['get-deleted', 0.1],
      ['restore', 0.15],
    ];
    let roll = this.prng.next() * weights.reduce((sum, [, weight]) => sum + weight, 0);
    const rolled = weights.find(([, weight]) => (roll -= weight) < 0)?.[0] ?? 'create';
    // The first Get comes as soon as a group is idle: a short run's few group operations could otherwise roll none
    // (seen: 6 creates and 4 deletions, no Get), and the run would not have checked GetVolumeGroupSnapshot at all.
    const unasked = !this.model.ops.some((op) => op.kind === 'group-get') && this.model.idleGroups().length > 0;
    const first = unasked ? 'get' : rolled;
    for (const what of [first, 'create', 'delete', 'get']) {
      const op =
        what === 'create'
          ? this.groupOne(origin, options)
          : what === 'recreate'
            ? options.node === undefined
              ? this.regroupOne(origin)
              : undefined
            : what === 'delete'
              ? this.deleteGroupOne(origin, options)
              : what === 'get'
                ? this.getGroupOne(origin, options)
                : what === 'get-deleted'
                  ? this.getGroupOne(origin, { ...options, deleted: true })
                  : this.restoreMemberOne(origin, options);
      if (op) return op;
    }
    return undefined;
  }

  /**
   * CreateVolumeGroupSnapshot (a new name) of 2 or 3 idle volumes of one node (`node` if given), retried until
   * answered with every member ready. The volumes are busy meanwhile (the group snapshot controller protects its
   * source PVCs); afterwards they may go, the members stay.
   */
  groupOne(origin: string, options: { node?: string; via?: number } = {}): OpRecord | undefined {
    const nodes = (options.node ? [options.node] : this.config.nodes).filter(
      (node) => this.model.idleVolumes(node).length >= 2,
    );
    if (nodes.length === 0) return undefined;
    const node = this.prng.pick(nodes);
    const idle = this.model.idleVolumes(node);
    const size = Math.min(idle.length, this.prng.int(2, 3));
    const sources: NameState[] = [];
    while (sources.length < size) {
      const picked = this.prng.pick(idle.filter((volume) => !sources.includes(volume)));
      sources.push(picked);
    }
    const group = this.model.newGroup(node, sources);
    return this.launchGroupCreate(group, origin, options.via, false);
  }

  /** CreateVolumeGroupSnapshot of a deleted group's name and volumes again: it must be a new group, new members. */
  regroupOne(origin: string): OpRecord | undefined {
    const candidates = this.model.recreatableGroups();
    if (candidates.length === 0) return undefined;
    return this.launchGroupCreate(this.prng.pick(candidates), origin, undefined, true);
  }

  private launchGroupCreate(group: GroupState, origin: string, via: number | undefined, recreate: boolean): OpRecord {
    const sources = group.sources.map((source) => this.model.state(source.name));
    for (const source of sources) source.busy = true;
    group.busy = true;
    const op = this.model.newOp('group', group.name, origin, {
      node: group.node,
      ...(recreate ? { recreate: true } : {}),
    });
    const request = { name: group.name, source_volume_ids: group.sources.map((source) => source.volumeId) };
    this.launch(
      op,
      via,
      async (_client, target) => {
        let answer: CreateVolumeGroupSnapshotResponse__Output;
        try {
          answer = await call<CreateVolumeGroupSnapshotResponse__Output>((done) =>
            target.group.CreateVolumeGroupSnapshot(request, withDeadline(this.config.callTimeoutMs), done),
          );
        } catch (error) {
          // The node was forgotten meanwhile: the CO has no group; members made are written off.
          if (codeOf(error).code === 'NOT_FOUND' && this.model.forgottenSince(group.node, op.startedAt)) {
            op.endedByForget = true;
            op.error = codeOf(error).message;
            return;
          }
          throw error;
        }
        const made = answer.group_snapshot;
        if (!made?.group_snapshot_id)
          throw new Error(`CreateVolumeGroupSnapshot ${group.name} answered without a group_snapshot_id`);
        if (!made.ready_to_use || made.snapshots.some((member) => !member.ready_to_use))
          throw new RetryLater('NOT_READY', `${made.group_snapshot_id} not ready to use`);
        op.groupSnapshotId = made.group_snapshot_id;
        op.memberIds = made.snapshots.map((member) => member.snapshot_id);
        this.model.groupCreated(
          op,
          made.group_snapshot_id,
          made.snapshots.map((member) => ({ snapshotId: member.snapshot_id, sourceVolumeId: member.source_volume_id })),
        );
      },
      'groups',
    );
    void this.running.get(op.id)?.then(() => {
      for (const source of sources) source.busy = false;
      group.busy = false;
    });
    return op;
  }

  /** DeleteVolumeGroupSnapshot of an idle group (on `node` if given) with its members, retried while ABORTED. */
  deleteGroupOne(origin: string, options: { node?: string; via?: number } = {}): OpRecord | undefined {
    const candidates = this.model.idleGroups(options.node);
    if (candidates.length === 0) return undefined;
    const group = this.prng.pick(candidates);
    const groupSnapshotId = group.groupId as string;
    const memberIds = group.members.map((member) => member.snapshotId);
    group.busy = true;
    const op = this.model.newOp('group-delete', group.name, origin, { groupSnapshotId, memberIds, node: group.node });
    this.launch(
      op,
      options.via,
      async (_client, target) => {
        await call<object>((done) =>
          target.group.DeleteVolumeGroupSnapshot(
            { group_snapshot_id: groupSnapshotId, snapshot_ids: memberIds },
            withDeadline(this.config.callTimeoutMs),
            done,
          ),
        );
        this.model.groupDeleted(op);
      },
      'groups',
    );
    // Names used again: half the background deletions are followed by the same name of the same volumes, which
    // must be a new group (new ID, new members), as a re-created snapshot must (issue 33). Chosen now: replayable.
    const again = origin === 'background' && this.prng.chance(0.5);
    void this.running.get(op.id)?.then(() => {
      group.busy = false;
      if (again && op.outcome === 'ok' && this.model.recreatableGroups().includes(group))
        this.launchGroupCreate(group, origin, undefined, true);
    });
    return op;
  }

  /**
   * GetVolumeGroupSnapshot of an idle group the CO holds (or, `deleted`, of one whose deletion was answered OK),
   * with the members it knows, as csi-snapshotter asks; retried while UNAVAILABLE (its node silent). The answer must
   * agree with the disk when it arrives (Model.groupGot).
   */
  getGroupOne(origin: string, options: { node?: string; deleted?: boolean } = {}): OpRecord | undefined {
    const candidates = (options.deleted ? this.model.deletedGroups() : this.model.idleGroups()).filter(
      (group) => options.node === undefined || group.node === options.node,
    );
    if (candidates.length === 0) return undefined;
    const group = this.prng.pick(candidates);
    const groupSnapshotId = (options.deleted ? group.deletedIds.at(-1) : group.groupId) as string;
    const members = (options.deleted ? group.answeredMembers : group.members).map((member) => member.snapshotId);
    group.busy = true;
    const op = this.model.newOp('group-get', group.name, origin, { groupSnapshotId, node: group.node });
    this.launch(
      op,
      undefined,
      async (_client, target) => {
        let answer: GetVolumeGroupSnapshotResponse__Output;
        try {
          answer = await call<GetVolumeGroupSnapshotResponse__Output>((done) =>
            target.group.GetVolumeGroupSnapshot(
              { group_snapshot_id: groupSnapshotId, snapshot_ids: members },
              withDeadline(this.config.callTimeoutMs),
              done,
            ),
          );
        } catch (error) {
          if (codeOf(error).code !== 'NOT_FOUND') throw error;
          this.model.groupGot(op, members, 'not-found');
          return;
        }
        this.model.groupGot(op, members, {
          members: (answer.group_snapshot?.snapshots ?? []).map((member) => member.snapshot_id),
        });
      },
      'groups',
    );
    void this.running.get(op.id)?.then(() => (group.busy = false));
    return op;
  }

  /** A restore from a member of an idle group (on `node` if given): CreateVolume of a new name, the member's size. */
  restoreMemberOne(origin: string, options: { node?: string } = {}): OpRecord | undefined {
    const candidates = this.model.idleGroups(options.node);
    if (candidates.length === 0) return undefined;
    const group = this.prng.pick(candidates);
    const member = this.prng.pick(group.members);
    const source = group.sources.find((candidate) => candidate.volumeId === member.sourceVolumeId);
    const state = this.model.newUnique(this.model.state(source?.name ?? group.sources[0]!.name).sizeBytes);
    state.busy = true;
    group.busy = true;
    const op = this.model.newOp('create', state.name, origin, { fromSnapshot: member.snapshotId, node: group.node });
    this.launchCreate(op, state, undefined, member.snapshotId);
    void this.running.get(op.id)?.then(() => {
      state.busy = false;
      group.busy = false;
    });
    return op;
  }

  /**
   * What a controller answers the GroupController: GroupControllerGetCapabilities (what csi-snapshotter asks when it
   * starts) and a CreateVolumeGroupSnapshot with no name and no volume, which a controller serving the service
   * refuses INVALID_ARGUMENT before anything starts. Each answer's gRPC code name, 'OK' for an answer.
   */
  async askGroupService(controller: string): Promise<{ capabilities: string; create: string }> {
    const target = this.controllers.find((candidate) => candidate.name === controller);
    if (!target) throw new Error(`no controller ${controller}`);
    const codeOfCall = (send: (done: (error: grpc.ServiceError | null) => void) => void) =>
      call<object>(send).then(
        () => 'OK',
        (error: unknown) => codeOf(error).code,
      );
    return {
      capabilities: await codeOfCall((done) =>
        target.group.GroupControllerGetCapabilities({}, withDeadline(this.config.callTimeoutMs), done),
      ),
      create: await codeOfCall((done) =>
        target.group.CreateVolumeGroupSnapshot(
          { name: '', source_volume_ids: [] },
          withDeadline(this.config.callTimeoutMs),
          done,
        ),
      ),
    };
  }

  /** Makes groups of volumes on `node` until it holds `count` idle ones (bounded), waiting for them. */
  async ensureGroupsOn(node: string, count: number, origin: string, timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (let tries = 0; tries < count * 3 && Date.now() < until; tries++) {
      const missing = count - this.model.idleGroups(node).length;
      if (missing <= 0) return;
      await this.ensureOn(node, 3 * missing, origin, until - Date.now());
      const ops = Array.from({ length: missing }, () => this.groupOne(origin, { node })).flatMap((op) =>
        op ? [op] : [],
      );
      await Promise.race([Promise.all(ops.map((op) => this.done(op))), sleep(Math.max(0, until - Date.now()))]);
    }
  }

  /** Sends the create (preferring op.node, if any) and records its answer in the model. */
  private launchCreate(
    op: OpRecord,
    state: Pick<NameState, 'name' | 'sizeBytes'>,
    via: number | undefined,
    fromSnapshot?: string,
  ): void {
    // A restore names no topology: the controller places it on the snapshot's node (docs/snapshots.md).
    const topology = op.node && !fromSnapshot ? { segments: { [TOPOLOGY_NODE_KEY]: op.node } } : undefined;
    const request = createRequest(state.name, state.sizeBytes, {
      ...(topology ? { accessibility_requirements: { preferred: [topology] } } : {}),
      ...(fromSnapshot ? { volume_content_source: { snapshot: { snapshot_id: fromSnapshot } } } : {}),
    });
    this.launch(
      op,
      via,
      async (client) => {
        const answer = await call<CreateVolumeResponse__Output>((done) =>
          client.CreateVolume(request, withDeadline(this.config.callTimeoutMs), done),
        );
        const volumeId = answer.volume?.volume_id;
        if (!volumeId) throw new Error(`CreateVolume ${state.name} answered without a volume_id`);
        op.volumeId = volumeId;
        this.model.created(op, volumeId);
      },
      fromSnapshot !== undefined,
    );
  }

  /** Creates volumes preferring `node` until it holds `count` idle ones (bounded), waiting for them. */
  async ensureOn(node: string, count: number, origin: string, timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (let tries = 0; tries < count * 3 && Date.now() < until; tries++) {
      const missing = count - this.model.idleVolumes(node).length;
      if (missing <= 0) return;
      const ops = Array.from({ length: missing }, () => this.create(origin, { prefer: node }));
      await Promise.race([Promise.all(ops.map((op) => this.done(op))), sleep(Math.max(0, until - Date.now()))]);
    }
  }

  done(op: OpRecord): Promise<void> {
    return this.running.get(op.id) ?? Promise.resolve();
  }

  /** Operations with an attempt in flight on a controller right now. */
  inFlightOn(controller: string): OpRecord[] {
    return this.model.ops.filter((op) => op.inFlightOn === controller);
  }

  /** Waits for every operation to end; those still retrying after timeoutMs end as 'unsettled'. */
  async settle(timeoutMs: number): Promise<void> {
    this.stopping = true;
    this.hardDeadline = Date.now() + timeoutMs;
    await Promise.all([...this.running.values()]);
  }

  pendingCount(): number {
    return this.running.size;
  }

  private launch(
    op: OpRecord,
    via: number | undefined,
    attempt: (client: ControllerClient, target: ControllerTarget) => Promise<void>,
    needs: Needs | boolean = undefined,
  ): void {
    this.issued++;
    const wanted: Needs = needs === true ? 'snapshots' : needs === false ? undefined : needs;
    const done = this.runOp(op, via, attempt, wanted).finally(() => this.running.delete(op.id));
    this.running.set(op.id, done);
  }

  private async runOp(
    op: OpRecord,
    via: number | undefined,
    attempt: (client: ControllerClient, target: ControllerTarget) => Promise<void>,
    needs: Needs,
  ): Promise<void> {
    let unexpected = 0;
    let delay = 250;
    for (let index = 0; ; index++) {
      if (Date.now() > this.hardDeadline) {
        op.outcome = 'unsettled';
        break;
      }
      // Snapshot calls and restores only to a controller whose build serves them, group calls only to one that
      // serves the GroupController (a sidecar beside an older controller finds none); none now: wait for one.
      const able =
        needs === 'snapshots'
          ? this.controllers.filter((c) => c.snapshots?.() ?? true)
          : needs === 'groups'
            ? this.controllers.filter((c) => c.groups?.() ?? true)
            : this.controllers;
      if (able.length === 0) {
        await sleep(1000);
        continue;
      }
      const first = index === 0 && via !== undefined ? this.controllers[via] : undefined;
      const target = first && able.includes(first) ? first : this.attemptRng.pick(able);
      if (!target) throw new Error(`no controller ${via}`);
      op.attempts++;
      op.inFlightOn = target.name;
      try {
        await attempt(target.client, target);
        op.outcome = 'ok';
        break;
      } catch (error) {
        const { code, message } = codeOf(error);
        op.codes[code] = (op.codes[code] ?? 0) + 1;
        // A build without snapshots (or groups) rolled in between the choice and the call: another controller.
        const unserved =
          code === 'UNIMPLEMENTED' &&
          ((needs === 'snapshots' && target.snapshots?.() === false) ||
            (needs === 'groups' && target.groups?.() === false));
        if (!RETRIABLE.has(code) && !unserved) {
          unexpected++;
          op.error = `${code}: ${message}`;
          this.unexpected.push({ at: new Date().toISOString(), op: op.id, kind: op.kind, code, message });
          if (unexpected >= MAX_UNEXPECTED) {
            op.outcome = 'failed';
            break;
          }
          delay = 2000;
        }
      } finally {
        op.inFlightOn = undefined;
      }
      await sleep(delay * (0.5 + Math.random()));
      const patient = Date.now() - op.startedAt > this.config.opBudgetMs;
      delay = Math.min(delay * 2, patient ? 5000 : 1000);
    }
    op.endedAt = Date.now();
  }
}
