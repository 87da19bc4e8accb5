import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findProjectRoot } from '../../temporal-dev/project-root';
import { UPGRADE_FROM, releaseCommit } from '../e2e-node/release';

/**
 * Replays recorded histories against the current workflow code: a change that would break workflows already
 * running in a cluster (a non-determinism error) fails here, in CI, before a rollout. See
 * docs/workflow-changes.md for patched() and for refreshing the fixtures (record-histories.ts).
 */
const FIXTURES = path.join(__dirname, '..', 'fixtures', 'histories');
const WORKFLOWS = path.join(__dirname, '..', '..', 'workflows');
/** One per workflow type and per branch a later patch may change (test/replay/record-histories.ts). */
const NAMES = [
  'create-snapshot',
  'create-snapshot-forgotten',
  'create-volume',
  'create-volume-completion',
  'create-volume-foreign-forget',
  'create-volume-group-snapshot',
  'create-volume-group-snapshot-forgotten',
  'create-volume-forgotten',
  'create-volume-no-room',
  'create-volume-restore',
  'create-volume-restore-forgotten',
  'delete-snapshot',
  'delete-snapshot-forgotten',
  'delete-volume',
  'delete-volume-group-snapshot',
  'delete-volume-group-snapshot-forgotten',
  'delete-volume-unknown-node',
  'delete-volume-waiting-for-node',
  'expand-volume',
  'inspect-volume',
  'list-snapshots-page',
  'list-transfers-page',
  'list-volumes-page',
  'move-snapshot',
  'move-volume',
  // Recorded by test/e2e-k8s/volume-move-claims.test.ts (DURABLE_CSI_RECORD_HISTORIES=1): they need an API server.
  'move-volume-cancelled',
  'move-volume-rolled-back',
  'move-volume-switched',
  // `volumes move --cancel` of a move terminated in its switch: the run that rolls it back (rollBackOnly).
  'move-volume-terminated-rolled-back',
  'node-presence',
  'node-presence-answers-from-report',
  'node-presence-written-off',
];
/** Workflow types 0.2.0 does not have: group snapshots, moves and the listing of their transfers. */
const SINCE_RELEASE = (name: string) =>
  name.includes('group-snapshot') || name.startsWith('move-') || name === 'list-transfers-page';
/**
 * The histories of this code (recorded again at each patched() change), and those 0.2.0, the first release, wrote:
 * kept in release-0.2.0/ so that the branches every patch keeps for them stay replayed (group snapshots and moves
 * came after).
 */
const EXPECTED = [...NAMES, ...NAMES.filter((name) => !SINCE_RELEASE(name)).map((name) => `release-0.2.0/${name}`)];

type History = temporal.api.history.v1.IHistory;

function readFixture(name: string): History {
  return temporal.api.history.v1.History.decode(fs.readFileSync(path.join(FIXTURES, `${name}.pb`)));
}

function workflowTypeOf(history: History): string {
  return history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? '';
}

/** The patch IDs whose markers the history records (the marker's details carry the ID, as JSON in this SDK). */
function patchMarkersOf(history: History): string[] {
  return (history.events ?? []).flatMap((event) => {
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_patch') return [];
    const text = Object.values(marker.details ?? {})
      .flatMap((payloads) => payloads.payloads ?? [])
      .map((payload) => Buffer.from(payload.data ?? []).toString('utf8'))
      .join(' ');
    return [...text.matchAll(/"id":"([^"]+)"/g)].map((match) => match[1]!);
  });
}

/** Every workflow type the bundle of `workflows` (this code's by default) exports (its index.ts). */
function exportedWorkflowTypes(workflows = WORKFLOWS): string[] {
  const index = fs.readFileSync(path.join(workflows, 'index.ts'), 'utf8');
  return [...index.matchAll(/export \{ ([\w, ]+) \} from/g)].flatMap((match) => match[1]!.split(/,\s*/));
}

/**
 * Every patch ID the workflow code asks, `patched('id')` or `patched(NAME)` with `const NAME = 'id'` in workflows/.
 * An argument that is neither fails: a patch this check cannot see would go without a fixture unnoticed.
 */
function patchIdsInCode(): string[] {
  const sources = fs
    .readdirSync(WORKFLOWS)
    .filter((file) => file.endsWith('.ts'))
    .map((file) => fs.readFileSync(path.join(WORKFLOWS, file), 'utf8'));
  const constants = new Map(
    sources.flatMap((source) => [...source.matchAll(/const (\w+) = '([^']+)'/g)].map((m) => [m[1]!, m[2]!] as const)),
  );
  const ids = sources.flatMap((source) =>
    // `patched()` with nothing in it is prose (comments name the function so).
    [...source.matchAll(/\b(?:patched|deprecatePatch)\(([^)]+)\)/g)].map((match) => {
      const argument = match[1]!.trim();
      const literal = /^'([^']+)'$/.exec(argument)?.[1] ?? constants.get(argument);
      if (!literal) throw new Error(`patched(${argument}): not a string literal or a constant of workflows/`);
      return literal;
    }),
  );
  return [...new Set(ids)].sort();
}

describe('recorded workflow histories replay against the current code', () => {
  let workflowBundle: { code: string };

  beforeAll(async () => {
    Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: [] });
    workflowBundle = await bundleWorkflowCode({
      workflowsPath: require.resolve('../../workflows'),
      logger: new DefaultLogger('WARN'),
    });
  });

  it('has every fixture', () => {
    const present = fs
      .readdirSync(FIXTURES, { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.pb'))
      .map((file) => file.replace(/\.pb$/, ''));
    expect(present.sort()).toEqual([...EXPECTED].sort());
  });

  it('has a fixture of every workflow type the bundle exports', () => {
    const recorded = new Set(EXPECTED.map((name) => workflowTypeOf(readFixture(name))));
    const types = exportedWorkflowTypes();
    expect(types.length).toBeGreaterThanOrEqual(9);
    expect(types.filter((type) => !recorded.has(type))).toEqual([]);
  });

  it("has a fixture recording every patch's marker", () => {
    const recorded = new Set(EXPECTED.flatMap((name) => patchMarkersOf(readFixture(name))));
    const ids = patchIdsInCode();
    expect(ids.filter((id) => !recorded.has(id))).toEqual([]);
  });

  it.each(EXPECTED)('%s replays without non-determinism', async (name) => {
    const history = readFixture(name);
    expect(history.events?.length).toBeGreaterThan(3);
    await Worker.runReplayHistory({ workflowBundle }, history, name);
  });
});

/**
 * A downgrade, or a rollout that stalls half-way: the previous release's workflow code replays the histories this
 * code writes, for every workflow type that release has (the node records are always open; so are deletions waiting
 * for their node). Its code is the release commit's tree (test/e2e-node/release.ts): workflows/ and what they import
 * (common/, activities/), bundled with this checkout's SDK. A patched() marker the release does not know fails here
 * (TMPRL1100): a change of options only is marked with deprecatePatch() instead (docs/workflow-changes.md,
 * "Downgrades").
 */
function releaseWorkflows(scratch: string): string {
  const root = findProjectRoot();
  const tree = path.join(scratch, 'tree.tar');
  const commit = releaseCommit(root, UPGRADE_FROM);
  execFileSync('git', ['-C', root, 'archive', '--output', tree, commit, 'workflows', 'common', 'activities']);
  execFileSync('tar', ['-xf', tree, '-C', scratch]);
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(scratch, 'node_modules'));
  return path.join(scratch, 'workflows');
}

describe(`${UPGRADE_FROM} replays the histories this code records (a downgrade)`, () => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-release-replay-'));
  const workflows = releaseWorkflows(scratch);
  const releaseTypes = new Set(exportedWorkflowTypes(workflows));
  const known = NAMES.filter((name) => releaseTypes.has(workflowTypeOf(readFixture(name))));
  let releaseBundle: { code: string };

  beforeAll(async () => {
    releaseBundle = await bundleWorkflowCode({ workflowsPath: workflows, logger: new DefaultLogger('WARN') });
  }, 120_000);
  afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

  it('has every type but those added since: a downgrade leaves their workflows waiting for this code again', () => {
    // Group snapshots and moves came after the release; a new workflow type added later must be named here too, as a
    // decision (docs/workflow-changes.md, "Downgrades").
    expect(NAMES.filter((name) => !known.includes(name))).toEqual(NAMES.filter(SINCE_RELEASE));
  });

  it.each(known)('%s (recorded by this code) replays on the release', async (name) => {
    await Worker.runReplayHistory({ workflowBundle: releaseBundle }, readFixture(name), name);
  });
});
