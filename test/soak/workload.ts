import * as grpc from '@grpc/grpc-js';
import { call, withDeadline } from '../../csi/client';
import { parseEndpoint } from '../../csi/endpoint';
import type { ControllerClient } from '../../csi/generated/csi/v1/Controller';
import type { CreateVolumeResponse__Output } from '../../csi/generated/csi/v1/CreateVolumeResponse';
import { csiPackage } from '../../csi/proto';
import { TOPOLOGY_NODE_KEY } from '../../common/names';
import { createRequest } from '../support/csi-requests';
import type { Model, OpRecord } from './model';
import type { Prng } from './prng';

/** What a CO retries: the call may still succeed. */
const RETRIABLE = new Set(['ABORTED', 'UNAVAILABLE', 'DEADLINE_EXCEEDED']);
/** An unexpected answer is retried too (the PVC or PV is still there), but only this many times. */
const MAX_UNEXPECTED = 5;

export interface ControllerTarget {
  name: string;
  client: ControllerClient;
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
export function connectController(name: string, endpoint: string): ControllerTarget & { close(): void } {
  const { address } = parseEndpoint(endpoint);
  const client = new (csiPackage().Controller)(address, grpc.credentials.createInsecure(), {
    'grpc.initial_reconnect_backoff_ms': 100,
    'grpc.min_reconnect_backoff_ms': 100,
    'grpc.max_reconnect_backoff_ms': 1000,
  });
  return { name, client, close: () => client.close() };
}

function codeOf(error: unknown): { code: string; message: string } {
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

  /** Sends the create (preferring op.node, if any) and records its answer in the model. */
  private launchCreate(op: OpRecord, state: { name: string; sizeBytes: number }, via: number | undefined): void {
    const topology = op.node ? { segments: { [TOPOLOGY_NODE_KEY]: op.node } } : undefined;
    const request = createRequest(
      state.name,
      state.sizeBytes,
      topology ? { accessibility_requirements: { preferred: [topology] } } : {},
    );
    this.launch(op, via, async (client) => {
      const answer = await call<CreateVolumeResponse__Output>((done) =>
        client.CreateVolume(request, withDeadline(this.config.callTimeoutMs), done),
      );
      const volumeId = answer.volume?.volume_id;
      if (!volumeId) throw new Error(`CreateVolume ${state.name} answered without a volume_id`);
      op.volumeId = volumeId;
      this.model.created(op, volumeId);
    });
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

  private launch(op: OpRecord, via: number | undefined, attempt: (client: ControllerClient) => Promise<void>): void {
    this.issued++;
    const done = this.runOp(op, via, attempt).finally(() => this.running.delete(op.id));
    this.running.set(op.id, done);
  }

  private async runOp(
    op: OpRecord,
    via: number | undefined,
    attempt: (client: ControllerClient) => Promise<void>,
  ): Promise<void> {
    let unexpected = 0;
    let delay = 250;
    for (let index = 0; ; index++) {
      if (Date.now() > this.hardDeadline) {
        op.outcome = 'unsettled';
        break;
      }
      const target = index === 0 && via !== undefined ? this.controllers[via] : this.attemptRng.pick(this.controllers);
      if (!target) throw new Error(`no controller ${via}`);
      op.attempts++;
      op.inFlightOn = target.name;
      try {
        await attempt(target.client);
        op.outcome = 'ok';
        break;
      } catch (error) {
        const { code, message } = codeOf(error);
        op.codes[code] = (op.codes[code] ?? 0) + 1;
        if (!RETRIABLE.has(code)) {
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
