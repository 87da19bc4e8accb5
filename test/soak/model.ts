import { parseVolumeId } from '../../common/volume-id';

/** One CSI operation as the orchestrator saw it, from its first attempt to its last answer. */
export interface OpRecord {
  id: number;
  kind: 'create' | 'delete';
  name: string;
  /** 'background', or the fault that issued it. */
  origin: string;
  /** The delete's volume, or the create's answer. */
  volumeId?: string;
  /** The node a create preferred, or a delete's home node. */
  node?: string;
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

interface NameState {
  name: string;
  sizeBytes: number;
  /** What the orchestrator was told exists: set by a successful create, cleared by a successful delete. */
  volumeId?: string;
  busy: boolean;
  deletedIds: string[];
  /** When the create that set volumeId answered: a deletion issued before then does not take it from the CO. */
  answeredAt?: number;
  /** A re-create issued while this volume's deletion was in flight: it must answer another volume. */
  supersedes?: string;
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
  /** While a node was forgotten (faults/forget-then-return.ts): deletes acknowledged then are the operator's call. */
  readonly forgotten: { node: string; from: number; to?: number }[] = [];
  private readonly names = new Map<string, NameState>();
  private unique = 0;

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
    state.answeredAt = Date.now();
    state.supersedes = undefined;
  }

  deleted(op: OpRecord): void {
    const state = this.state(op.name);
    if (op.volumeId) state.deletedIds.push(op.volumeId);
    // A create answered with this volume after the deletion was issued gave the CO a PV for it: it stays known,
    // and the audit reports it lost if the deletion removed it.
    if (state.volumeId === op.volumeId && (state.answeredAt ?? 0) < op.startedAt) state.volumeId = undefined;
  }

  /** name -> volume ID of every volume the orchestrator was told exists. */
  known(): Map<string, string> {
    const known = new Map<string, string>();
    for (const state of this.names.values()) if (state.volumeId) known.set(state.name, state.volumeId);
    return known;
  }

  anomaly(op: OpRecord, what: string): void {
    this.anomalies.push({ at: new Date().toISOString(), op: op.id, what });
  }
}
