/**
 * The node's storage: each pool is the authority on which volumes exist on it. Implementations: dir (a
 * directory per volume, capacity by reservation) and loop (a preallocated file per volume, attached as a loop
 * device). No gRPC or Temporal types here.
 *
 * Errors are DriverError (common/failures.ts). Every mutating method is idempotent and crash safe: the intent
 * is journaled before anything is allocated, and open() reconciles the journal with what exists on disk.
 * Staging is recorded in the pool before anything is attached or mounted, and open() re-establishes it.
 */
import type { AccessType } from '../../common/backend-kinds';
import type { NewIdentity, PoolIdentity } from './pool-layout';

/** The controller checks requests by the same name (common/backend-kinds.ts). */
export type { AccessType };

export interface VolumeRecord {
  /** 32 lower-case hex digits, the volume's name inside the pool (the last field of the volume ID). */
  key: string;
  /** The CO's name for the volume (CreateVolumeRequest.name); stored, never used in a path. */
  name: string;
  capacityBytes: number;
  parameters: Record<string, string>;
  /** ISO 8601. */
  createdAt: string;
  /** Absolute path of the volume's data inside the pool: dir: its directory; loop: its image file. */
  path: string;
  /** Loop only (dir volumes are always mount volumes and record neither field). */
  accessType?: AccessType;
  /** Loop mount volumes: the filesystem made at create. */
  fsType?: string;
  /** dir with --dir-quota=project: the project quota that enforces the capacity (storage/dir/dir-backend.ts). */
  projectId?: number;
  /** The snapshot or volume the volume was made from; absent for an empty volume. */
  contentSource?: ContentSource;
  /** Set while a move holds the volume (fenceVolume): it cannot be staged or grown until the move lets it go. */
  moving?: MoveFence;
}

/**
 * A move's hold on its source volume (docs/volume-moves.md, "In use"): from before the move's snapshot until the move
 * ends, nothing can stage the volume, so nothing writes to it after the instant that is copied.
 */
export interface MoveFence {
  moveKey: string;
  targetNodeId: string;
}

/**
 * What a new volume is filled from: a snapshot of this pool (restore), another volume of it (clone), or a copy a move
 * pulled from another node into this pool's transfers/in/<move key>/ (storage/pool/transfer.ts, docs/volume-moves.md).
 */
export type ContentSource = { snapshotKey: string } | { volumeKey: string } | { moveKey: string };

/**
 * A snapshot: an independent copy of a volume's data in the pool's snapshots/ directory. The volume may be deleted
 * while it has snapshots; they stay, and count towards the pool's reservation until they are deleted.
 */
export interface SnapshotRecord {
  /** 32 lower-case hex digits, the snapshot's name inside the pool (the last field of the snapshot ID). */
  key: string;
  /** The CO's name for the snapshot (CreateSnapshotRequest.name); stored, never used in a path. */
  name: string;
  /** Key of the volume it was copied from (which may since have been deleted). */
  sourceKey: string;
  /** The source volume's capacity when copied: the smallest volume it can be restored into. */
  sizeBytes: number;
  /** ISO 8601. */
  createdAt: string;
  /** Absolute path of the copy: dir: its directory; loop: its image file. */
  path: string;
  /** Loop: the source volume's access type and filesystem, which a volume restored from it keeps. */
  accessType?: AccessType;
  fsType?: string;
  /**
   * A member of a group snapshot (docs/snapshots.md, "Group snapshots"): the group's key. Such a copy is deleted with
   * its group only (DeleteSnapshot of it is FailedPrecondition, as CSI lets a plugin say).
   */
  groupKey?: string;
  /**
   * A snapshot moved here from another node (docs/volume-moves.md, "Snapshots"): the ID of the volume it was taken
   * of, which lives (or lived) on that node; `sourceKey` is then that volume's key there, not a key of this pool.
   */
  sourceVolumeId?: string;
}

/** A group snapshot: one copy per member volume, taken at one instant (CreateVolumeGroupSnapshot). */
export interface CreateGroupSnapshotSpec {
  groupKey: string;
  /** The CO's name for the group; each member is recorded as `<name>/<source key>`. */
  name: string;
  members: { snapshotKey: string; sourceKey: string }[];
}

export interface CreateSnapshotSpec {
  snapshotKey: string;
  /** Key of a volume of this pool; with `moved`, the key of the moved snapshot's source on its own node. */
  sourceKey: string;
  name: string;
  /**
   * A move's adopt: the copy a move pulled into transfers/in/<move key>/ (verified) becomes the snapshot, which
   * keeps what the source node's snapshot record said of itself.
   */
  moved?: MovedSnapshotOrigin;
}

/** What a moved snapshot keeps of the one it was moved from (read from its record by the source's offer). */
export interface MovedSnapshotOrigin {
  moveKey: string;
  sourceVolumeId: string;
  sizeBytes: number;
  createdAt: string;
  accessType?: AccessType;
  fsType?: string;
}

/** One page of a pool's volumes; `more` when volumes with later keys exist. */
export interface VolumePage {
  volumes: VolumeRecord[];
  more: boolean;
}

/** One page of a pool's snapshots; `more` when snapshots with later keys exist. */
export interface SnapshotPage {
  snapshots: SnapshotRecord[];
  more: boolean;
}

export interface PoolStatus {
  /** UUID written once when the pool is first opened. */
  poolId: string;
  capacityBytes: number;
  /** Sum of the capacity of every volume and snapshot and of every create still in the journals. */
  reservedBytes: number;
  availableBytes: number;
  volumeCount: number;
  snapshotCount: number;
}

export interface OpenReport {
  poolId: string;
  /** True when this open wrote the pool identity. */
  created: boolean;
  /** Journal entries completed or rolled back while opening, for the log. */
  reconciled: {
    key: string;
    op: 'create' | 'delete' | 'snapshot-create' | 'snapshot-delete';
    outcome: 'rolled-back' | 'completed' | 'kept';
  }[];
  /** Things in the pool the journal and records do not explain; reported, never deleted. */
  strays: string[];
  /**
   * Staged volumes whose device or mount open() had to re-establish (after a reboot), or could not, and volumes
   * whose filesystem a killed agent's copy left frozen.
   */
  repaired: { key: string; outcome: 'restaged' | 'detached' | 'limited' | 'failed' | 'thawed'; message: string }[];
}

export interface CreateVolumeSpec {
  key: string;
  name: string;
  capacityBytes: number;
  parameters: Record<string, string>;
  /** Block volumes are handed over as a raw device (loop only); mount volumes carry a filesystem. */
  accessType?: AccessType;
  /** Filesystem for mount volumes on backends that format (loop): ext4 (default) or xfs. */
  fsType?: string;
  /**
   * Restore or clone: the new volume starts as a copy of this snapshot or volume of the same pool (NotFound when
   * it has none). capacityBytes below the source's size is OutOfRange; above it, the volume is grown after the copy.
   */
  contentSource?: ContentSource;
}

export interface ExpandResult {
  capacityBytes: number;
  /** True when the node must still grow the filesystem (NodeExpandVolume). */
  nodeExpansionRequired: boolean;
}

export interface BackendCapabilities {
  accessTypes: readonly AccessType[];
  /** Filesystems mount volumes are formatted with, the default first; empty when the backend does not format. */
  fsTypes: readonly string[];
}

export interface StageOptions {
  accessType: AccessType;
  /** The capability's fs_type; empty means the volume's own. Backends that do not format ignore it. */
  fsType: string;
  /** The capability's mount_flags, used where the backend mounts a filesystem (loop mount volumes). */
  mountFlags: string[];
}

export interface PublishOptions {
  accessType: AccessType;
  readonly: boolean;
}

export interface VolumeUsage {
  unit: 'bytes' | 'inodes';
  total: number;
  /** Absent for block volumes, whose use the node cannot see. */
  used?: number;
  available?: number;
}

export interface VolumeStats {
  usage: VolumeUsage[];
  /** The volume's health as NodeGetVolumeHealth answers it (`volumeHealth`), for the COs that read stats instead. */
  problems: VolumeProblem[];
  /** True when there is any problem; the message says each (older COs read these two). */
  abnormal: boolean;
  message: string;
}

/**
 * A health problem of one volume, as the node sees it (CSI's VolumeHealthErrorType, v1.13): `degraded` usable but
 * not as it should be, `inaccessible` not usable from this node, `data-loss` its data is gone. `reason` is the CSI
 * reason (CamelCase, one per status), `message` says what is wrong and what to do.
 */
export interface VolumeProblem {
  status: 'degraded' | 'inaccessible' | 'data-loss';
  reason: string;
  message: string;
}

/** A health problem of the pool as a whole (CSI's StorageHealthErrorType): every volume on it is affected. */
export interface PoolProblem {
  status: 'degraded' | 'unreachable';
  reason: string;
  message: string;
}

export interface StorageBackend {
  readonly kind: string;
  readonly capabilities: BackendCapabilities;
  /**
   * Creates the pool (identity file, with `fresh` in it) if it has none and reconciles the journal. Must be called
   * first. Whether a pool without an identity may get one is the caller's decision (agent/pool-gate.ts).
   */
  open(fresh?: NewIdentity): Promise<OpenReport>;
  /** The pool's identity, read without creating or locking anything; undefined when it has none yet. */
  identity(): Promise<PoolIdentity | undefined>;
  status(): Promise<PoolStatus>;
  /**
   * Same key: returns the existing record (AlreadyExists if its name or size differ).
   * Same name under another key: returns that record when compatible (the name is the idempotency key),
   * AlreadyExists when the size or parameters differ. No room: ResourceExhausted, nothing allocated.
   */
  createVolume(spec: CreateVolumeSpec): Promise<VolumeRecord>;
  /** Absent: resolves { existed: false }. Never touches anything outside the pool. */
  deleteVolume(key: string): Promise<{ existed: boolean }>;
  /** Absent: undefined. */
  getVolume(key: string): Promise<VolumeRecord | undefined>;
  /** Sorted by key. */
  listVolumes(): Promise<VolumeRecord[]>;
  /** At most `limit` volumes whose key sorts after `afterKey` (from the first when undefined), sorted by key. */
  listVolumePage(afterKey: string | undefined, limit: number): Promise<VolumePage>;
  /**
   * Grows the volume's reservation (and backing file) to at least capacityBytes; idempotent, never shrinks.
   * Absent: NotFound. No room: ResourceExhausted, nothing changed.
   */
  expandVolume(key: string, capacityBytes: number): Promise<ExpandResult>;
  /**
   * Holds the volume for a move: FailedPrecondition, nothing changed, while it is staged (in use) or held by another
   * move; the same move again is a no-op. While held, stage and expand are refused (FailedPrecondition). `replacing`:
   * a hold of that move (terminated, it will never let go) is taken over.
   */
  fenceVolume(key: string, fence: MoveFence, replacing?: string): Promise<void>;
  /** Lets the volume go if `moveKey` holds it; false when it does not (or the volume is gone). */
  unfenceVolume(key: string, moveKey: string): Promise<boolean>;
  /**
   * The node part of CSI (paths come from the CO and are used as mount targets only). The volume must exist
   * (NotFound). Stage records the staging in the pool first, then attaches and mounts; again with the same
   * arguments is a no-op, at another path FailedPrecondition. A staged volume refuses deleteVolume.
   */
  stageVolume(key: string, stagingPath: string, options: StageOptions): Promise<void>;
  /** Not staged there: no-op. Still published somewhere: FailedPrecondition. Detaches loop devices. */
  unstageVolume(key: string, stagingPath: string): Promise<void>;
  /** Bind mounts the staged volume (block: its device, onto a file) at targetPath, which it creates. */
  publishVolume(key: string, stagingPath: string, targetPath: string, options: PublishOptions): Promise<void>;
  /** Unmounts and removes the target (only an empty directory or an empty file); absent: no-op. */
  unpublishVolume(key: string, targetPath: string): Promise<void>;
  /** volumePath must show this volume (NotFound otherwise), unless its data or device is missing (abnormal). */
  volumeStats(key: string, volumePath: string): Promise<VolumeStats>;
  /**
   * The volume's problems, read from what the node sees (the pool's mount and free space, the image, its loop device,
   * the staging record); empty when it has none. Callable whether or not the volume is staged (CSI allows a health
   * probe of a volume a stage just failed for). Volume absent from a pool that is there: NotFound.
   */
  volumeHealth(key: string): Promise<VolumeProblem[]>;
  /** The pool's own problems (its disk no longer mounted, read-only, full); empty when it has none. */
  poolHealth(): Promise<PoolProblem[]>;
  /** Makes the device and filesystem seen at volumePath as large as the volume (NodeExpandVolume). */
  expandFilesystem(key: string, volumePath: string): Promise<{ capacityBytes: number }>;
  /**
   * Copies the volume `sourceKey` into a new snapshot (journaled: a crash part way leaves an intent that the next
   * call or open() rolls back). Same key and source: returns the existing snapshot. The key or the name taken by a
   * snapshot of another volume: AlreadyExists. Source absent: NotFound. No room: ResourceExhausted.
   */
  createSnapshot(spec: CreateSnapshotSpec): Promise<SnapshotRecord>;
  /**
   * 'absent' when the pool holds no such snapshot. Never touches anything outside the pool. A member of a group
   * snapshot is FailedPrecondition unless `asMember` (a written-off copy the node's record deletes).
   */
  deleteSnapshot(key: string, options?: { asMember?: boolean }): Promise<'deleted' | 'absent'>;
  /**
   * Copies every member volume at one instant, each into a snapshot of the group (storage/pool/snapshots.ts):
   * the same key, name and members again returns the members made; a partial group a crash left is made again.
   */
  createGroupSnapshot(spec: CreateGroupSnapshotSpec): Promise<SnapshotRecord[]>;
  /**
   * Deletes every member of the group; `memberKeys` must be exactly the members the pool holds for it
   * (InvalidArgument otherwise). 'absent' when none is held.
   */
  deleteGroupSnapshot(groupKey: string, memberKeys: string[]): Promise<'deleted' | 'absent'>;
  /** Absent: undefined. */
  getSnapshot(key: string): Promise<SnapshotRecord | undefined>;
  /** Sorted by key. */
  listSnapshots(): Promise<SnapshotRecord[]>;
  /**
   * At most `limit` snapshots whose key sorts after `afterKey` (from the first when undefined), sorted by key; with
   * `only`, just those of that key or of that source volume key.
   */
  listSnapshotPage(
    afterKey: string | undefined,
    limit: number,
    only?: { key?: string; sourceKey?: string; groupKey?: string },
  ): Promise<SnapshotPage>;
  /** Releases the pool (its lock) and waits for calls in progress; open() may be called again afterwards. */
  close(): Promise<void>;
}
