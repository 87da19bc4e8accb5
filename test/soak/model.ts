import { parseGroupSnapshotId, parseSnapshotId, parseVolumeId } from '../../common/names';

/** One CSI operation as the orchestrator saw it, from its first attempt to its last answer. */
export interface OpRecord {
  id: number;
  /**
   * CreateVolume (a restore too: see fromSnapshot), DeleteVolume, CreateSnapshot, DeleteSnapshot, and the
   * GroupController's CreateVolumeGroupSnapshot, DeleteVolumeGroupSnapshot and GetVolumeGroupSnapshot.
   */
  kind: 'create' | 'delete' | 'snapshot' | 'snapshot-delete' | 'group' | 'group-delete' | 'group-get';
  /** The volume's name, or the snapshot's (CreateSnapshot, DeleteSnapshot), or the group's (group ops). */
  name: string;
  /** 'background', or the fault that issued it. */
  origin: string;
  /** The delete's volume, the create's answer, or a CreateSnapshot's source volume. */
  volumeId?: string;
  /** A CreateSnapshot's answer, a DeleteSnapshot's snapshot. */
  snapshotId?: string;
  /** A group op's group (g1_ ID): CreateVolumeGroupSnapshot's answer, the group deleted or asked for. */
  groupSnapshotId?: string;
  /** A group op's members (s1_ IDs): the create's answer, those named by the deletion, the Get's answer. */
  memberIds?: string[];
  /** A GetVolumeGroupSnapshot answered NOT_FOUND (its outcome is ok: a definite answer). */
  notFound?: boolean;
  /** A restore: CreateVolume with volume_content_source.snapshot of this snapshot ID. */
  fromSnapshot?: string;
  /** A CreateSnapshot of a name used before: after its snapshot was deleted, or while its deletion was in flight. */
  recreate?: boolean;
  /** The node a create preferred, a delete's home node, a snapshot op's or restore's node (the source's). */
  node?: string;
  /**
   * A CreateSnapshot (or CreateVolumeGroupSnapshot) answered NOT_FOUND because its source's node was forgotten
   * meanwhile (docs/snapshots.md): the CO holds no snapshot, and the copy, if made, is written off on the node's
   * record.
   */
  endedByForget?: boolean;
  startedAt: number;
  endedAt?: number;
  attempts: number;
  /** Answers that were retried, by gRPC code. */
  codes: Record<string, number>;
  outcome?: 'ok' | 'failed' | 'unsettled';
  error?: string;
  /** The controller the attempt in flight went to, if any. */
  inFlightOn?: string;
}

export interface NameState {
  name: string;
  sizeBytes: number;
  /** What the orchestrator was told exists: set by a successful create, cleared by a successful delete. */
  volumeId?: string;
  busy: boolean;
  deletedIds: string[];
  /**
   * The model's event count when the create that set volumeId answered: a deletion issued before then does not take
   * it from the CO. A count, not a clock: a deletion issued in the same millisecond as the answer came after it.
   */
  answeredEvent?: number;
  /** A re-create issued while this volume's deletion was in flight: it must answer another volume. */
  supersedes?: string;
}

/** A CSI snapshot name and what the orchestrator was told about it (a VolumeSnapshot and its content). */
export interface SnapshotState {
  name: string;
  /** The source volume when the snapshot was asked for (it may be deleted since: the copy is independent). */
  sourceVolumeId: string;
  sourceName: string;
  /** The source's node: the copy and every restore from it are there. */
  node: string;
  sizeBytes: number;
  /** Set by a CreateSnapshot answered ready, cleared by a DeleteSnapshot answered OK. */
  snapshotId?: string;
  /** The ID once answered, kept after a deletion (for the audit's history). */
  answeredId?: string;
  busy: boolean;
  deleted: boolean;
  /** Snapshot IDs of this name whose DeleteSnapshot answered OK: a re-create must not answer one again. */
  deletedIds: string[];
  /** The model's event count when the create that set snapshotId answered (as NameState.answeredEvent). */
  answeredEvent?: number;
  /** A re-create issued while this snapshot's deletion was in flight: it must answer another snapshot. */
  supersedes?: string;
}

/**
 * A group snapshot name (`soak-g<n>`) and what the orchestrator was told about it (a VolumeGroupSnapshot and its
 * content). Its members are snapshot copies of the node's pool, each recorded as `<group name>/<volume key>`.
 */
export interface GroupState {
  name: string;
  /** The volumes asked for (all of one node), in the order asked; a re-create of the name asks for the same. */
  sources: { name: string; volumeId: string }[];
  node: string;
  /** Set by a CreateVolumeGroupSnapshot answered OK, cleared by a DeleteVolumeGroupSnapshot answered OK. */
  groupId?: string;
  /** The members answered with groupId: snapshot ID and source volume ID. */
  members: { snapshotId: string; sourceVolumeId: string }[];
  /** The ID once answered, and its members, kept after a deletion (for Get and the audit's history). */
  answeredId?: string;
  answeredMembers: { snapshotId: string; sourceVolumeId: string }[];
  busy: boolean;
  deleted: boolean;
  /** Group IDs of this name whose deletion answered OK: a re-create must not answer one again. */
  deletedIds: string[];
}

export interface Anomaly {
  at: string;
  op: number;
  what: string;
}

const MiB = 1024 ** 2;
const SIZES = [16 * MiB, 32 * MiB, 64 * MiB, 128 * MiB];

/** The orchestrator's view: names, their volumes, and every operation issued. */
export class Model {
  readonly ops: OpRecord[] = [];
  readonly anomalies: Anomaly[] = [];
  /**
   * Snapshots the CO held without a copy, counted when seen (for the audit's lost list): answered ready with no copy
   * on disk, or held (a re-create answered with the ID being deleted) when a deletion of it ended OK.
   */
  readonly lostSnapshots: { op: number; name: string; snapshotId: string; reason: string }[] = [];
  /** DeleteSnapshot answered OK while the copy was on disk (its node not forgotten): leaked copies, when answered. */
  readonly falseSnapshotDeletes: { op: number; name: string; snapshotId: string }[] = [];
  /** Whether a snapshot's copy is on its node's disk now (set by the harness; undefined: not known). */
  copyOnDisk?: (snapshotId: string) => boolean | undefined;
  /**
   * DeleteVolumeGroupSnapshot answered OK while a member's copy was on disk (its node not forgotten): leaked member
   * copies, when answered.
   */
  readonly falseGroupDeletes: { op: number; name: string; groupSnapshotId: string; snapshotIds: string[] }[] = [];
  /** While a node was forgotten (faults/forget-then-return.ts): deletes acknowledged then are the operator's call. */
  readonly forgotten: { node: string; from: number; to?: number }[] = [];
  private readonly names = new Map<string, NameState>();
  private readonly snapshots = new Map<string, SnapshotState>();
  private readonly groups = new Map<string, GroupState>();
  private uniqueGroup = 0;
  private unique = 0;
  private uniqueSnapshot = 0;
  /** Counts issues and answers, so their order is known even within one millisecond. */
  private events = 0;
  private readonly issuedEvent = new Map<number, number>();

  constructor(recurring: number) {
    for (let index = 0; index < recurring; index++) {
      // A fixed size per recurring name: a re-create asks for exactly what the first create asked.
      this.names.set(`soak-r${index}`, {
        name: `soak-r${index}`,
        sizeBytes: SIZES[index % SIZES.length] as number,
        busy: false,
        deletedIds: [],
      });
    }
  }

  newOp(kind: OpRecord['kind'], name: string, origin: string, extra: Partial<OpRecord> = {}): OpRecord {
    const op: OpRecord = { id: this.ops.length + 1, kind, name, origin, startedAt: Date.now(), attempts: 0, codes: {} };
    Object.assign(op, extra);
    this.ops.push(op);
    this.issuedEvent.set(op.id, ++this.events);
    return op;
  }

  /** A recurring name with no volume and nothing in flight, if any. */
  idleRecurring(pick: <T>(items: readonly T[]) => T): NameState | undefined {
    const idle = [...this.names.values()].filter((s) => s.name.startsWith('soak-r') && !s.busy && !s.volumeId);
    return idle.length > 0 ? pick(idle) : undefined;
  }

  newUnique(sizeBytes: number): NameState {
    const state: NameState = { name: `soak-u${++this.unique}`, sizeBytes, busy: false, deletedIds: [] };
    this.names.set(state.name, state);
    return state;
  }

  randomSize(random: () => number): number {
    return SIZES[Math.floor(random() * SIZES.length)] as number;
  }

  /** Volumes that exist (as far as the orchestrator knows) and have nothing in flight, optionally on one node. */
  idleVolumes(node?: string): NameState[] {
    return [...this.names.values()].filter(
      (s) => !s.busy && s.volumeId !== undefined && (node === undefined || parseVolumeId(s.volumeId)?.nodeId === node),
    );
  }

  /** Bytes of the volumes the orchestrator believes a node holds. */
  bytesOn(node: string): number {
    return [...this.names.values()]
      .filter((s) => s.volumeId !== undefined && parseVolumeId(s.volumeId)?.nodeId === node)
      .reduce((sum, s) => sum + s.sizeBytes, 0);
  }

  presentCount(): number {
    return [...this.names.values()].filter((s) => s.volumeId !== undefined).length;
  }

  state(name: string): NameState {
    const state = this.names.get(name);
    if (!state) throw new Error(`unknown name ${name}`);
    return state;
  }

  created(op: OpRecord, volumeId: string): void {
    const state = this.state(op.name);
    const key = (id: string) => id.split('_')[3];
    const reused = state.deletedIds.find((id) => key(id) === key(volumeId));
    if (reused) this.anomaly(op, `create of ${op.name} answered ${volumeId}: the volume ${reused}, already deleted`);
    if (state.supersedes === volumeId)
      this.anomaly(
        op,
        `re-create of ${op.name} answered ${volumeId}, whose deletion was in flight: a PV for a volume being deleted`,
      );
    else if (state.volumeId !== undefined && state.volumeId !== volumeId && state.volumeId !== state.supersedes) {
      this.anomaly(op, `create of ${op.name} answered ${volumeId} while ${state.volumeId} exists`);
    }
    for (const other of this.names.values()) {
      if (other !== state && other.volumeId === volumeId)
        this.anomaly(op, `create of ${op.name} answered ${volumeId}, the volume of ${other.name}`);
    }
    state.volumeId = volumeId;
    state.answeredEvent = ++this.events;
    state.supersedes = undefined;
  }

  deleted(op: OpRecord): void {
    const state = this.state(op.name);
    if (op.volumeId) state.deletedIds.push(op.volumeId);
    // A create answered with this volume after the deletion was issued gave the CO a PV for it: it stays known,
    // and the audit reports it lost if the deletion removed it.
    const issued = this.issuedEvent.get(op.id) ?? 0;
    if (state.volumeId === op.volumeId && (state.answeredEvent ?? 0) < issued) state.volumeId = undefined;
  }

  /** name -> volume ID of every volume the orchestrator was told exists. */
  known(): Map<string, string> {
    const known = new Map<string, string>();
    for (const state of this.names.values()) if (state.volumeId) known.set(state.name, state.volumeId);
    return known;
  }

  /** Whether the node was forgotten (faults/forget-then-return.ts) at some point since `since`. */
  forgottenSince(node: string | undefined, since: number): boolean {
    return this.forgotten.some((window) => window.node === node && (window.to ?? Infinity) >= since);
  }

  /** A new snapshot name (`soak-s<n>`, each used once) of an existing volume. */
  newSnapshot(source: NameState): SnapshotState {
    const volumeId = source.volumeId as string;
    const state: SnapshotState = {
      name: `soak-s${++this.uniqueSnapshot}`,
      sourceVolumeId: volumeId,
      sourceName: source.name,
      node: parseVolumeId(volumeId)?.nodeId ?? '?',
      sizeBytes: source.sizeBytes,
      busy: false,
      deleted: false,
      deletedIds: [],
    };
    this.snapshots.set(state.name, state);
    return state;
  }

  snapshotState(name: string): SnapshotState {
    const state = this.snapshots.get(name);
    if (!state) throw new Error(`unknown snapshot ${name}`);
    return state;
  }

  /** Snapshots that exist (as far as the orchestrator knows) and have nothing in flight, optionally on one node. */
  idleSnapshots(node?: string): SnapshotState[] {
    return [...this.snapshots.values()].filter(
      (s) => !s.busy && s.snapshotId !== undefined && (node === undefined || s.node === node),
    );
  }

  snapshotCount(): number {
    return [...this.snapshots.values()].filter((s) => s.snapshotId !== undefined).length;
  }

  /**
   * Snapshots whose name can be asked for again with the same source (a re-create after the deletion answered OK):
   * deleted, nothing in flight, and the source volume still the one the name was made of, idle.
   */
  recreatableSnapshots(): SnapshotState[] {
    return [...this.snapshots.values()].filter((s) => {
      const source = this.names.get(s.sourceName);
      return (
        s.deleted && !s.busy && s.snapshotId === undefined && source?.volumeId === s.sourceVolumeId && !source.busy
      );
    });
  }

  snapshotCreated(op: OpRecord, snapshotId: string): void {
    const state = this.snapshotState(op.name);
    const parts = parseSnapshotId(snapshotId);
    if (!parts) this.anomaly(op, `CreateSnapshot ${op.name} answered ${snapshotId}, not a snapshot ID`);
    else if (parts.nodeId !== state.node)
      this.anomaly(op, `CreateSnapshot ${op.name} of ${state.sourceVolumeId} answered ${snapshotId}: another node`);
    for (const other of this.snapshots.values()) {
      if (other !== state && other.answeredId === snapshotId)
        this.anomaly(op, `CreateSnapshot ${op.name} answered ${snapshotId}, the snapshot of ${other.name}`);
    }
    const key = (id: string) => parseSnapshotId(id)?.key;
    const reused = state.deletedIds.find((id) => key(id) === key(snapshotId));
    if (state.supersedes === snapshotId)
      this.anomaly(
        op,
        `re-create of snapshot ${op.name} answered ${snapshotId}, whose deletion was in flight: a snapshot being deleted`,
      );
    else if (reused)
      this.anomaly(
        op,
        `re-create of snapshot ${op.name} answered ${snapshotId}: the snapshot ${reused}, already deleted ` +
          '(a re-create after a deletion must be a new snapshot)',
      );
    else if (state.snapshotId !== undefined && state.snapshotId !== snapshotId && state.snapshotId !== state.supersedes)
      this.anomaly(op, `CreateSnapshot ${op.name} answered ${snapshotId} while ${state.snapshotId} exists`);
    // Ready means copied: an answer whose copy is not on disk gave the CO a snapshot that is already lost (the
    // earlier deletion's copy, answered again), however the CO uses it later.
    if (this.copyOnDisk?.(snapshotId) === false)
      this.lostSnapshots.push({
        op: op.id,
        name: op.name,
        snapshotId,
        reason: `CreateSnapshot op ${op.id} answered it ready with no copy on disk`,
      });
    state.snapshotId = snapshotId;
    state.answeredId = snapshotId;
    state.answeredEvent = ++this.events;
    state.supersedes = undefined;
    state.deleted = false;
  }

  snapshotDeleted(op: OpRecord): void {
    const state = this.snapshotState(op.name);
    const snapshotId = op.snapshotId as string;
    state.deletedIds.push(snapshotId);
    const onDisk = this.copyOnDisk?.(snapshotId);
    // A CreateSnapshot answered with this ID after the deletion was issued gave the CO a snapshot of it: it stays
    // held. Its copy is gone now (the deletion says so): lost, whatever the CO does with it later (a later deletion
    // of it answers OK and leaves nothing for the end's audit to see).
    const issued = this.issuedEvent.get(op.id) ?? 0;
    if (state.snapshotId === snapshotId && (state.answeredEvent ?? 0) > issued) {
      if (onDisk !== true)
        this.lostSnapshots.push({
          op: op.id,
          name: op.name,
          snapshotId,
          reason: `its deletion (op ${op.id}, issued before the CO was given it) ended OK: the copy is gone`,
        });
      return;
    }
    // OK while the copy is still on disk (not written off by a forget): a false "deleted", the copy leaked now even
    // if a later answer hands the same ID out again.
    if (onDisk === true && !this.forgottenSince(op.node, op.startedAt))
      this.falseSnapshotDeletes.push({ op: op.id, name: op.name, snapshotId });
    if (state.snapshotId === snapshotId) {
      state.snapshotId = undefined;
      state.deleted = true;
    }
  }

  /** name -> snapshot ID of every snapshot the orchestrator was told exists. */
  knownSnapshots(): Map<string, string> {
    const known = new Map<string, string>();
    for (const state of this.snapshots.values()) if (state.snapshotId) known.set(state.name, state.snapshotId);
    return known;
  }

  /** A new group name (`soak-g<n>`) of these volumes, all on `node`. */
  newGroup(node: string, sources: NameState[]): GroupState {
    const state: GroupState = {
      name: `soak-g${++this.uniqueGroup}`,
      sources: sources.map((source) => ({ name: source.name, volumeId: source.volumeId as string })),
      node,
      members: [],
      answeredMembers: [],
      busy: false,
      deleted: false,
      deletedIds: [],
    };
    this.groups.set(state.name, state);
    return state;
  }

  groupState(name: string): GroupState {
    const state = this.groups.get(name);
    if (!state) throw new Error(`unknown group snapshot ${name}`);
    return state;
  }

  /** Groups that exist (as far as the orchestrator knows) and have nothing in flight, optionally on one node. */
  idleGroups(node?: string): GroupState[] {
    return [...this.groups.values()].filter(
      (g) => !g.busy && g.groupId !== undefined && (node === undefined || g.node === node),
    );
  }

  groupCount(): number {
    return [...this.groups.values()].filter((g) => g.groupId !== undefined).length;
  }

  /** Deleted groups with nothing in flight: asked for again by ID (Get must say NOT_FOUND), or re-created by name. */
  deletedGroups(): GroupState[] {
    return [...this.groups.values()].filter((g) => g.deleted && !g.busy && g.groupId === undefined);
  }

  /** Deleted groups whose every volume is still the one the name was made of, and idle: the name can be asked again. */
  recreatableGroups(): GroupState[] {
    return this.deletedGroups().filter((g) =>
      g.sources.every((source) => {
        const volume = this.names.get(source.name);
        return volume?.volumeId === source.volumeId && !volume.busy;
      }),
    );
  }

  /**
   * A CreateVolumeGroupSnapshot answered OK: one ID of the volumes' node, every member ready, one member per volume
   * asked (and none other), each a snapshot of that node whose copy is on disk; never an ID deleted before.
   */
  groupCreated(op: OpRecord, groupSnapshotId: string, members: { snapshotId: string; sourceVolumeId: string }[]): void {
    const state = this.groupState(op.name);
    const parts = parseGroupSnapshotId(groupSnapshotId);
    if (!parts) this.anomaly(op, `CreateVolumeGroupSnapshot ${op.name} answered ${groupSnapshotId}, not a group ID`);
    else if (parts.nodeId !== state.node)
      this.anomaly(
        op,
        `CreateVolumeGroupSnapshot ${op.name} answered ${groupSnapshotId}: not ${state.node}, its volumes' node`,
      );
    const asked = state.sources.map((source) => source.volumeId).sort();
    const answered = members.map((member) => member.sourceVolumeId).sort();
    if (asked.join(',') !== answered.join(','))
      this.anomaly(
        op,
        `CreateVolumeGroupSnapshot ${op.name} answered members of ${answered.join(', ')}, asked ${asked.join(', ')}`,
      );
    for (const member of members) {
      const memberParts = parseSnapshotId(member.snapshotId);
      if (!memberParts || memberParts.nodeId !== state.node || memberParts.poolIdPrefix !== parts?.poolIdPrefix)
        this.anomaly(
          op,
          `group ${op.name} ${groupSnapshotId} answered member ${member.snapshotId}: not a snapshot of its pool`,
        );
      if (this.copyOnDisk?.(member.snapshotId) === false)
        this.lostSnapshots.push({
          op: op.id,
          name: op.name,
          snapshotId: member.snapshotId,
          reason: `CreateVolumeGroupSnapshot op ${op.id} answered member ${member.snapshotId} ready with no copy on disk`,
        });
    }
    for (const other of this.groups.values()) {
      if (other !== state && other.answeredId === groupSnapshotId)
        this.anomaly(
          op,
          `CreateVolumeGroupSnapshot ${op.name} answered ${groupSnapshotId}, the group of ${other.name}`,
        );
    }
    if (state.deletedIds.includes(groupSnapshotId))
      this.anomaly(
        op,
        `re-create of group ${op.name} answered ${groupSnapshotId}, already deleted (a re-create must be a new group)`,
      );
    else if (state.groupId !== undefined && state.groupId !== groupSnapshotId)
      this.anomaly(
        op,
        `CreateVolumeGroupSnapshot ${op.name} answered ${groupSnapshotId} while ${state.groupId} exists`,
      );
    state.groupId = groupSnapshotId;
    state.answeredId = groupSnapshotId;
    state.members = members;
    state.answeredMembers = members;
    state.deleted = false;
  }

  /** A DeleteVolumeGroupSnapshot answered OK: every member's copy must be gone (unless its node was forgotten). */
  groupDeleted(op: OpRecord): void {
    const state = this.groupState(op.name);
    const groupSnapshotId = op.groupSnapshotId as string;
    state.deletedIds.push(groupSnapshotId);
    const left = (op.memberIds ?? []).filter((id) => this.copyOnDisk?.(id) === true);
    if (left.length > 0 && !this.forgottenSince(op.node, op.startedAt))
      this.falseGroupDeletes.push({ op: op.id, name: op.name, groupSnapshotId, snapshotIds: left });
    if (state.groupId === groupSnapshotId) {
      state.groupId = undefined;
      state.members = [];
      state.deleted = true;
    }
  }

  /**
   * A GetVolumeGroupSnapshot's answer must agree with the disk when it arrives: OK with exactly the members the CO
   * holds (or was answered), each copy on disk; NOT_FOUND only when no member copy is (a false NOT_FOUND tells the
   * CO a group it holds is gone). A node forgotten meanwhile answers NOT_FOUND by decision: exempt.
   */
  groupGot(op: OpRecord, expected: string[], answer: { members: string[] } | 'not-found'): void {
    const onDisk = expected.filter((id) => this.copyOnDisk?.(id) === true);
    if (answer === 'not-found') {
      op.notFound = true;
      if (onDisk.length > 0 && !this.forgottenSince(op.node, op.startedAt))
        this.anomaly(
          op,
          `GetVolumeGroupSnapshot ${op.groupSnapshotId} (${op.name}) answered NOT_FOUND with ${onDisk.length} of ` +
            `${expected.length} member copies on disk: a false "deleted"`,
        );
      return;
    }
    op.memberIds = answer.members;
    const missing = answer.members.filter((id) => this.copyOnDisk?.(id) === false);
    if (missing.length > 0)
      this.anomaly(
        op,
        `GetVolumeGroupSnapshot ${op.groupSnapshotId} (${op.name}) answered members with no copy on disk: ${missing.join(', ')}`,
      );
    if ([...answer.members].sort().join(',') !== [...expected].sort().join(','))
      this.anomaly(
        op,
        `GetVolumeGroupSnapshot ${op.groupSnapshotId} (${op.name}) answered ${answer.members.join(', ') || 'no member'}, ` +
          `the group's members are ${expected.join(', ')}`,
      );
  }

  /** `<group name>/<volume key>` -> member snapshot ID, of every group the orchestrator holds (as its node records). */
  knownGroupMembers(): Map<string, string> {
    const known = new Map<string, string>();
    for (const group of this.groups.values()) {
      if (group.groupId === undefined) continue;
      for (const member of group.members)
        known.set(`${group.name}/${parseVolumeId(member.sourceVolumeId)?.key ?? '?'}`, member.snapshotId);
    }
    return known;
  }

  anomaly(op: OpRecord, what: string): void {
    this.anomalies.push({ at: new Date().toISOString(), op: op.id, what });
  }
}
