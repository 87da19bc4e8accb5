/**
 * The node's storage: each pool is the authority on which volumes exist on it. Implementations: dir (a
 * directory per volume, capacity by reservation) and, later, loop. No gRPC or Temporal types here.
 *
 * Errors are DriverError (common/failures.ts). Every mutating method is idempotent and crash safe: the intent
 * is journaled before anything is allocated, and open() reconciles the journal with what exists on disk.
 */
export interface VolumeRecord {
  /** 32 lower-case hex digits, the volume's name inside the pool (the last field of the volume ID). */
  key: string;
  /** The CO's name for the volume (CreateVolumeRequest.name); stored, never used in a path. */
  name: string;
  capacityBytes: number;
  parameters: Record<string, string>;
  /** ISO 8601. */
  createdAt: string;
  /** Absolute path of the volume's data inside the pool. */
  path: string;
}

export interface PoolStatus {
  /** UUID written once when the pool is first opened. */
  poolId: string;
  capacityBytes: number;
  /** Sum of the capacity of every volume and of every create still in the journal. */
  reservedBytes: number;
  availableBytes: number;
  volumeCount: number;
}

export interface OpenReport {
  poolId: string;
  /** True when this open wrote the pool identity. */
  created: boolean;
  /** Journal entries completed or rolled back while opening, for the log. */
  reconciled: { key: string; op: 'create' | 'delete'; outcome: 'rolled-back' | 'completed' | 'kept' }[];
  /** Things in the pool the journal and records do not explain; reported, never deleted. */
  strays: string[];
}

export interface CreateVolumeSpec {
  key: string;
  name: string;
  capacityBytes: number;
  parameters: Record<string, string>;
  /** Block volumes are handed over as a raw device (loop only); mount volumes carry a filesystem. */
  accessType?: 'mount' | 'block';
  /** Filesystem for mount volumes on backends that format (loop): ext4 (default) or xfs. */
  fsType?: string;
}

export interface ExpandResult {
  capacityBytes: number;
  /** True when the node must still grow the filesystem (NodeExpandVolume). */
  nodeExpansionRequired: boolean;
}

export interface StorageBackend {
  readonly kind: string;
  /** Creates the pool (identity file) if needed and reconciles the journal. Must be called first. */
  open(): Promise<OpenReport>;
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
  /**
   * Grows the volume's reservation (and backing file) to at least capacityBytes; idempotent, never shrinks.
   * Absent: NotFound. No room: ResourceExhausted, nothing changed.
   */
  expandVolume(key: string, capacityBytes: number): Promise<ExpandResult>;
  /** Releases the pool (its lock) and waits for calls in progress; open() may be called again afterwards. */
  close(): Promise<void>;
}
