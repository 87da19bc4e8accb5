import type { Client } from '@temporalio/client';
import { supportsBlock } from '../common/backend-kinds';
import type { NodeView } from '../common/names';
import { listNodeRecords, readNodeRecord, type NodeRecordView } from '../node-records/reads';

/**
 * Where a new volume may go, in one place: a create's workflow asks `findCandidates` (a local activity in the
 * controller's workflow worker: it costs no activity task and no extra workflow task, and only reads, so running it
 * again after a crash is harmless). It reads only the records of the nodes the request names, or a bounded sample
 * (no table of every node), judges each against the request, and ranks what fits. The answer is all that enters the
 * create's history, bounded whatever the cluster size; the node's own pool accepts or refuses the volume.
 */
export function createPlacementActivities(deps: { client: Client; driverName: string }) {
  const reads = PlacementReads.fromTemporal(deps.client, deps.driverName);
  return {
    async findCandidates(request: CandidateRequest): Promise<CandidateAnswer> {
      return findCandidates(reads, request);
    },
  };
}

export type PlacementActivities = ReturnType<typeof createPlacementActivities>;

/** What a create asks of placement; only the nodes named (or a bounded sample) are read. */
export interface CandidateRequest {
  capacityBytes: number;
  accessType: 'mount' | 'block';
  requisite?: string[];
  preferred: string[];
  /**
   * A restore or clone: its one possible node is asked even when its record shows too little room. The record is
   * up to a heartbeat (10 s) old, so right after deletions it still counts their space; only the pool knows.
   */
  askPoolWhenFull?: boolean;
}

/** Bounded whatever the cluster size: this lands in the create's history. */
export interface CandidateAnswer {
  /** Live, capable nodes whose latest report has room. */
  candidates: NodeView[];
  /** Requisite nodes with no record (no agent ever registered them, or the record was lost). */
  unknown: string[];
  offline: number;
  /** Live nodes whose own latest report has no room: the only basis for RESOURCE_EXHAUSTED. */
  full: number;
  /** Nodes whose backend cannot serve the access type (block needs loop). */
  incapable: number;
  /**
   * Named nodes whose record keeps the decision that they are gone for good (`nodes forget`): not "offline", since
   * nothing will answer there again; a restore or clone whose source was there is NOT_FOUND. Absent in older
   * histories (their forgotten nodes counted as offline).
   */
  forgotten?: ForgottenOn[];
  /**
   * Without topology: how many node records visibility listed (live or not). Visibility lags the records by seconds,
   * so 0 right after a stack starts means "none listed yet", not "none registered". Absent in older histories.
   */
  listed?: number;
}

/** A node placement found forgotten, with the decision's reason (what the create's answer names). */
export interface ForgottenOn {
  nodeId: string;
  reason: string;
}

/** Enough choice for placement; more would only make the history longer. */
const MAX_CANDIDATES = 8;
/** Node records read per create at most: a requisite of thousands (Immediate binding) costs the same as eight. */
const MAX_READS = 64;
const READ_BATCH = 8;

/** The named nodes' records when the request has topology, else a bounded sample of live ones. */
export async function findCandidates(reads: PlacementReads, request: CandidateRequest): Promise<CandidateAnswer> {
  const answer = request.requisite
    ? await readNamedNodes(reads, request, request.requisite)
    : await sampleLiveNodes(reads, request);
  return { ...answer, candidates: rankCandidates(answer.candidates, request, Math.random) };
}

/** Reads the named nodes' records, preferred ones first, a batch at a time, until enough candidates are found. */
async function readNamedNodes(
  reads: PlacementReads,
  request: CandidateRequest,
  named: string[],
): Promise<CandidateAnswer> {
  const allowed = new Set(named);
  const order = [...new Set([...request.preferred.filter((nodeId) => allowed.has(nodeId)), ...shuffle(named)])];
  const answer = emptyAnswer();
  for (let start = 0; start < Math.min(order.length, MAX_READS); start += READ_BATCH) {
    const batch = order.slice(start, start + READ_BATCH);
    const views = await Promise.all(batch.map((nodeId) => reads.record(nodeId)));
    batch.forEach((nodeId, index) => {
      const view = views[index];
      if (view?.forgotten) noteForgotten(answer, view.forgotten);
      else if (view?.node) judge(answer, view.node, request);
      else answer.unknown.push(nodeId);
    });
    if (answer.candidates.length >= MAX_CANDIDATES) break;
  }
  return answer;
}

/**
 * No topology: the preferred nodes' records, then a bounded sample of live records from visibility. Visibility lags
 * the records (a record that just turned live may still be listed with the phase it started with, or not at all):
 * when the live sample yields nothing, the most recent records of any phase are described, which is current.
 */
export async function sampleLiveNodes(reads: PlacementReads, request: CandidateRequest): Promise<CandidateAnswer> {
  const answer = emptyAnswer();
  const judged = new Set([...new Set(request.preferred)].slice(0, READ_BATCH));
  const views = await Promise.all([...judged].map((nodeId) => reads.record(nodeId)));
  for (const view of views) {
    if (view?.forgotten) noteForgotten(answer, view.forgotten);
    else if (view?.node) judge(answer, view.node, request);
  }
  const sample = await reads.liveSample(MAX_READS);
  for (const view of shuffle(sample)) {
    if (answer.candidates.length >= MAX_CANDIDATES) break;
    if (view.node && !judged.has(view.nodeId)) judge(answer, view.node, request);
    judged.add(view.nodeId);
  }
  const listed = new Set(sample.map((view) => view.nodeId));
  if (answer.candidates.length === 0) {
    const recent = (await reads.recentSample(MAX_READS)).filter((view) => !view.forgotten);
    recent.forEach((view) => listed.add(view.nodeId));
    const unjudged = recent.filter((view) => !judged.has(view.nodeId)).slice(0, READ_BATCH);
    const fresh = await Promise.all(unjudged.map((view) => reads.record(view.nodeId)));
    for (const view of fresh) if (view?.node && !view.forgotten) judge(answer, view.node, request);
  }
  answer.listed = listed.size;
  return answer;
}

function judge(answer: CandidateAnswer, node: NodeView, request: CandidateRequest): void {
  if (!node.live) answer.offline++;
  else if (request.accessType === 'block' && !supportsBlock(node.backend)) answer.incapable++;
  else if (node.availableBytes < request.capacityBytes && !request.askPoolWhenFull) answer.full++;
  else answer.candidates.push(node);
}

function noteForgotten(answer: CandidateAnswer, decision: ForgottenOn): void {
  (answer.forgotten ??= []).push({ nodeId: decision.nodeId, reason: decision.reason });
}

function emptyAnswer(): CandidateAnswer {
  return { candidates: [], unknown: [], offline: 0, full: 0, incapable: 0 };
}

function shuffle<T>(items: T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

/**
 * Orders the candidates: the preferred ones first (in the CO's order), then the rest in a random order weighted by
 * free space. Free space is only as fresh as the last heartbeat, so always taking the emptiest node would send every
 * create between two heartbeats to the same node. It keeps only live nodes inside the requisite set with room for the
 * volume (whatever the caller judged). Pure: `random` is a parameter, so the order is tested with a seeded one.
 */
export function rankCandidates(
  nodes: NodeView[],
  request: Omit<CandidateRequest, 'accessType'>,
  random: () => number,
): NodeView[] {
  const allowed = request.requisite ? new Set(request.requisite) : undefined;
  const fits = nodes.filter(
    (node) =>
      node.live &&
      (!allowed || allowed.has(node.nodeId)) &&
      (request.askPoolWhenFull === true || node.availableBytes >= request.capacityBytes),
  );
  const preferred = [...new Set(request.preferred)].flatMap((nodeId) => fits.filter((node) => node.nodeId === nodeId));
  const rest = fits.filter((node) => !request.preferred.includes(node.nodeId));
  return [...preferred, ...weightedShuffle(rest, random)];
}

/**
 * Efraimidis-Spirakis in log form (ln(u)/weight, exact for any byte count): a node with twice the free space is
 * twice as likely to come first.
 */
function weightedShuffle(nodes: NodeView[], random: () => number): NodeView[] {
  return nodes
    .map((node) => ({ node, score: Math.log(random()) / Math.max(1, node.availableBytes) }))
    .sort((a, b) => b.score - a.score || a.node.nodeId.localeCompare(b.node.nodeId))
    .map(({ node }) => node);
}

/**
 * Node records as placement reads them, shared by the creates running in this controller for a moment. A burst
 * of creates otherwise describes the same few records (or queries visibility) once each; the figures in a
 * record are only as fresh as the node's last heartbeat (10 s) anyway, and placement is a choice, not a promise:
 * the node's own pool accepts or refuses the volume. A missing record is never kept (a node that registers
 * now is seen by the next create), and neither is a failed read.
 */
export class PlacementReads {
  private readonly records = new Map<string, Cached<NodeRecordView | undefined>>();
  private sample: Cached<NodeRecordView[]> | undefined;
  private recent: Cached<NodeRecordView[]> | undefined;

  constructor(
    private readonly source: RecordSource,
    private readonly maxAgeMs = PLACEMENT_READ_MAX_AGE_MS,
  ) {}

  static fromTemporal(client: Client, driverName: string): PlacementReads {
    return new PlacementReads({
      record: (nodeId) => readNodeRecord(client, driverName, nodeId),
      liveSample: (limit) => listNodeRecords(client, driverName, { phase: 'live', limit }),
      recentSample: (limit) => listNodeRecords(client, driverName, { limit }),
    });
  }

  /** The node's record, read at most `maxAgeMs` ago; undefined when it has none. */
  record(nodeId: string): Promise<NodeRecordView | undefined> {
    this.forgetExpired();
    const cached = this.records.get(nodeId);
    if (cached && fresh(cached, this.maxAgeMs)) return cached.value;
    const entry = this.remember(this.source.record(nodeId), (view) => view === undefined);
    entry.forget = () => this.records.get(nodeId) === entry && this.records.delete(nodeId);
    this.records.set(nodeId, entry);
    return entry.value;
  }

  /** Up to `limit` live records from visibility, listed at most `maxAgeMs` ago. */
  liveSample(limit: number): Promise<NodeRecordView[]> {
    if (this.sample && fresh(this.sample, this.maxAgeMs)) return this.sample.value;
    const entry = this.remember(this.source.liveSample(limit));
    entry.forget = () => this.sample === entry && (this.sample = undefined);
    this.sample = entry;
    return entry.value;
  }

  /** Up to `limit` records of any phase from visibility (the most recently started first), listed at most `maxAgeMs` ago. */
  recentSample(limit: number): Promise<NodeRecordView[]> {
    if (this.recent && fresh(this.recent, this.maxAgeMs)) return this.recent.value;
    const entry = this.remember(this.source.recentSample(limit));
    entry.forget = () => this.recent === entry && (this.recent = undefined);
    this.recent = entry;
    return entry.value;
  }

  /** Until it settles, callers share the read in flight; its age counts from when it settled. */
  private remember<T>(read: Promise<T>, notWorthKeeping: (value: T) => boolean = () => false): Cached<T> {
    const entry: Cached<T> = { value: read, settledAt: undefined, forget: () => undefined };
    read.then(
      (value) => {
        entry.settledAt = Date.now();
        if (notWorthKeeping(value)) entry.forget();
      },
      () => entry.forget(),
    );
    return entry;
  }

  /** Bounds the map on a large cluster: entries older than their age limit go when the next read comes. */
  private forgetExpired(): void {
    if (this.records.size < EXPIRY_SWEEP_SIZE) return;
    for (const [nodeId, entry] of this.records) if (!fresh(entry, this.maxAgeMs)) this.records.delete(nodeId);
  }
}

/** Where records come from: DescribeWorkflowExecution of one record, visibility listings of live or any records. */
export interface RecordSource {
  record(nodeId: string): Promise<NodeRecordView | undefined>;
  liveSample(limit: number): Promise<NodeRecordView[]>;
  recentSample(limit: number): Promise<NodeRecordView[]>;
}

/** How long placement reuses a record it read; well under the records' heartbeat interval (10 s). */
export const PLACEMENT_READ_MAX_AGE_MS = 1_000;
const EXPIRY_SWEEP_SIZE = 1_024;

interface Cached<T> {
  value: Promise<T>;
  settledAt: number | undefined;
  forget: () => unknown;
}

function fresh(entry: Cached<unknown>, maxAgeMs: number): boolean {
  return entry.settledAt === undefined || Date.now() - entry.settledAt < maxAgeMs;
}
