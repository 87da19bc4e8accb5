import { log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { supportsBlock } from '../common/backend-kinds';
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
import { PlacementReads } from './placement-reads';

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
}

export function createControlActivities(deps: ControlDeps) {
  const reads = PlacementReads.fromTemporal(deps.client, deps.driverName);
  return {
    /** The first `limit` reported nodes, in volume-ID order, that may hold a volume after the position. */
    async readNodesAfter(input: { after: string; limit: number }): Promise<ListNodesAnswer> {
      return reportedNodesAfter(deps, input);
    },

    async findCandidates(request: CandidateRequest): Promise<CandidateAnswer> {
      return findCandidates(reads, request);
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

/** The named nodes' records when the request has topology, else a bounded sample of live ones. */
export function findCandidates(reads: PlacementReads, request: CandidateRequest): Promise<CandidateAnswer> {
  return request.requisite ? readNamedNodes(reads, request, request.requisite) : sampleLiveNodes(reads, request);
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
