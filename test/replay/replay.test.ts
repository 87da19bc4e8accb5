import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Replays recorded histories against the current workflow code: a change that would break workflows already
 * running in a cluster (a non-determinism error) fails here, in CI, before a rollout. See
 * docs/workflow-changes.md for patched() and for refreshing the fixtures.
 */
const FIXTURES = path.join(__dirname, '..', 'fixtures', 'histories');
/** Histories written by the current code, and (in folders) by earlier builds and releases still running in clusters. */
const EXPECTED = [
  'create-volume',
  'create-volume-completion',
  'create-volume-foreign-forget',
  'create-volume-forgotten',
  'create-volume-restore-forgotten',
  'delete-volume',
  'delete-volume-unknown-node',
  'delete-volume-waiting-for-node',
  'expand-volume',
  'node-presence',
  'node-presence-answers-from-report',
  // Main at b2fdf7c, before forget-notice-per-node: a notice of one node ended the completion on another.
  'b2fdf7c/create-volume-foreign-forget',
  'b2fdf7c/create-volume-forgotten',
  'release-0.1/create-volume',
  'release-0.1/delete-volume',
  'release-0.1/delete-volume-waiting-for-node',
  'release-0.1/expand-volume',
  'release-0.1/node-registry',
];

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

  it.each(EXPECTED)('%s replays without non-determinism', async (name) => {
    const history = temporal.api.history.v1.History.decode(fs.readFileSync(path.join(FIXTURES, `${name}.pb`)));
    expect(history.events.length).toBeGreaterThan(3);
    await Worker.runReplayHistory({ workflowBundle }, history, name);
  });
});
