import fs from 'node:fs';
import path from 'node:path';
import type { RealCluster } from '../real-cluster';
import { keepClusterLogs, snapshotLeftovers } from './keep-logs';
import { countSpecs, itSpecs, report, runSuite, type SuiteDriver, type SuiteOutcome } from './run-suite';
import { skipReason } from './skips';
import { focusFor, fullRun } from './scope';

/** The whole suite may take this long for one driver; CI's subset takes far less (docs/storage-suite.md). */
const RUN_TIMEOUT_MS = (fullRun() ? 180 : 60) * 60_000;

/**
 * Runs the suite for one driver YAML (its focus for this run, or `focus`) and fails on any failed spec, an empty run
 * or an unexplained skip; returns the outcome for a caller's own checks.
 */
export async function expectSuitePasses(
  node: RealCluster,
  driver: SuiteDriver,
  focus = focusFor(driver),
  reportSuffix = '',
): Promise<SuiteOutcome> {
  const outcome = await runSuite(node, { driver, focus, timeoutMs: RUN_TIMEOUT_MS }, reportSuffix);
  console.log(report(outcome));
  const failed = outcome.specs
    .filter((spec) => spec.status === 'failed')
    .map((spec) => `${spec.name}: ${spec.message.split('\n')[0]}`);
  if (outcome.exitCode !== 0 || failed.length > 0) {
    const kept = keepClusterLogs(node, path.dirname(outcome.outputFile));
    console.log(`cluster logs kept in ${kept.dir}`);
    // In the failure itself, which CI prints: whether a sidecar or the driver was restarted during the run.
    const restarted = `the driver's containers that ran more than once: ${kept.restarted.join(', ') || 'none'}`;
    // And the snapshot objects still there, contents first: a deletion wait that ran out names its object's state.
    // The first ten only, so that CI's output keeps the rest of the failure.
    const leftovers = snapshotLeftovers(node);
    const shown =
      leftovers.slice(0, 10).join('\n') + (leftovers.length > 10 ? `\nand ${leftovers.length - 10} more` : '');
    const left = `snapshot objects left: ${leftovers.length === 0 ? 'none' : `\n${shown}`}`;
    if (failed.length > 0) throw new Error(`${failed.length} failed: ${failed.join('; ')}\n${restarted}\n${left}`);
  }
  const tail = (): string => fs.readFileSync(outcome.outputFile, 'utf8').slice(-6000);
  if (outcome.specs.length === 0)
    throw new Error(`no JUnit report with specs at ${outcome.junitFile} (exit ${outcome.exitCode}):\n${tail()}`);
  const counts = countSpecs(outcome.specs);
  expect(counts.run).toBeGreaterThan(0);
  const unexplained = itSpecs(outcome.specs)
    .filter(
      (spec) => spec.status !== 'passed' && spec.status !== 'failed' && skipReason(spec.message, driver) === undefined,
    )
    .map((spec) => `${spec.name}: ${spec.message}`);
  expect(unexplained).toEqual([]);
  expect(outcome.exitCode).toBe(0);
  return outcome;
}
