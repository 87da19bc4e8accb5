import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { allowedPending, allowedSkip, ALLOWED_SKIPS } from './allowed-skips';
import { selectedConfigs, type SanityConfig } from './configs';
import type { SpecResult } from '../support/ginkgo-junit';
import { cleanUp, leftInPool, loopDevicesUnder, mountsUnder } from './leaks';
import { installedCsiSanity, PROJECT_ROOT, runCsiSanity, type SanityOutcome } from './run-sanity';

/**
 * The Kubernetes CSI conformance suite (csi-sanity, pinned by scripts/install-tools.js) against a real node agent
 * and a real controller, each on its own socket, for every backend and access type. docs/csi-sanity.md explains
 * the flags, the configurations and every allowed skip.
 */

const SANITY_TIMEOUT_MS = 15 * 60_000;

/**
 * csi-sanity, unlike a CO, does not retry ABORTED, which the controller answers when a workflow outlives
 * --call-wait. The cluster's usual 3 s would turn a slow CI machine into failures; a stuck operation still fails.
 * 20 s was not enough once: a loop block volume's deletion in the cleanup answered ABORTED at a load average of 22
 * on 2 cores (a cold run with the Go builds, a real node and other suites beside it).
 */
const CALL_WAIT = '45s';

describe.each(selectedConfigs(process.env.SANITY_CONFIGS).map((config) => [config.name, config] as const))(
  'csi-sanity: %s',
  (_, config) => {
    const cluster = new TestCluster(`sanity-${config.name}`);
    const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-sanity-'));
    const roots = [workDir, cluster.root];

    const reportDir = path.join(PROJECT_ROOT, 'test-artifacts', 'csi-sanity', config.name);
    fs.rmSync(reportDir, { recursive: true, force: true });

    afterAll(async () => {
      keepLogs(cluster, reportDir);
      await cluster.teardown();
      // Anything csi-sanity's own cleanup missed was already reported; do not let it outlive the test.
      const left = cleanUp(roots);
      if (left.length === 0) fs.rmSync(workDir, { recursive: true, force: true });
      else console.error(`csi-sanity ${config.name}: could not clean up, left ${workDir}:\n  ${left.join('\n  ')}`);
    });

    it(
      `passes with only allowed skips (backend ${config.backend}, access type ${config.accessType})`,
      async () => {
        const version = installedCsiSanity(); // throws when missing: this test is never skipped
        const node = await startNode(cluster, config, workDir);
        const snapshots = config.snapshots ? ['--snapshots'] : [];
        const controller = await cluster.startController('controller', ['--call-wait', CALL_WAIT, ...snapshots]);
        const outcome = await runCsiSanity({
          nodeEndpoint: node.endpoint,
          controllerEndpoint: controller.endpoint,
          accessType: config.accessType,
          workDir,
          reportDir,
          timeoutMs: SANITY_TIMEOUT_MS,
          seed: process.env.SANITY_SEED,
        });
        const problems = check(config, outcome, cluster, roots);
        console.log(report(version, config, outcome, problems));
        fs.writeFileSync(
          path.join(path.dirname(outcome.junitFile), 'summary.json'),
          `${JSON.stringify({ version, config, args: outcome.args, problems, specs: outcome.specs }, null, 2)}\n`,
        );
        expect(problems).toEqual([]);
      },
      SANITY_TIMEOUT_MS + 120_000,
    );
  },
);

/** One node agent on the configuration's backend, checked to really run it (an ignored option would not fail). */
async function startNode(cluster: TestCluster, config: SanityConfig, workDir: string): Promise<ManagedProcess> {
  // csi-sanity's staging and mount directories play kubelet's: the agent confines paths to --kubelet-dir.
  const node = await cluster.startNode('node-1', { backend: config.backend, extra: ['--kubelet-dir', workDir] });
  const args = node.child.spawnargs;
  const backend = args[args.indexOf('--backend') + 1];
  if (!args.includes('--backend') || backend !== config.backend) {
    throw new Error(
      `configuration ${config.name} needs a node agent with --backend ${config.backend}, but TestCluster.startNode ` +
        `started: ${args.slice(2).join(' ')}`,
    );
  }
  return node;
}

function check(config: SanityConfig, outcome: SanityOutcome, cluster: TestCluster, roots: string[]): string[] {
  const problems: string[] = [];
  const tail = () => outcome.output.split('\n').slice(-40).join('\n');
  if (outcome.specs.length === 0) {
    problems.push(
      `no JUnit report with specs at ${outcome.junitFile} (exit ${exitOf(outcome)}); output ends:\n${tail()}`,
    );
    return problems;
  }
  for (const spec of outcome.specs) {
    if (spec.status === 'failed') problems.push(`FAILED ${spec.name}: ${firstLines(spec.message)}`);
    if (spec.status === 'pending' && !allowedPending(spec.name)) problems.push(`PENDING (not allowed) ${spec.name}`);
    if (spec.status === 'skipped' && !allowedSkip(config.name, spec.message)) {
      problems.push(`SKIPPED (not allowed) ${spec.name}: ${spec.message}`);
    }
  }
  if (!outcome.specs.some((spec) => spec.status === 'passed')) problems.push('no spec passed');
  const failed = outcome.specs.some((spec) => spec.status === 'failed');
  if (!failed && outcome.exitCode !== 0) {
    problems.push(`csi-sanity exited with ${exitOf(outcome)} though no spec failed; output ends:\n${tail()}`);
  }
  const counts = countsOf(outcome.specs);
  const summary = outcome.summary;
  if (summary && (summary.passed !== counts.passed || summary.failed !== counts.failed)) {
    problems.push(
      `the JUnit report (${JSON.stringify(counts)}) disagrees with Ginkgo's summary (${JSON.stringify(summary)})`,
    );
  }
  for (const mount of mountsUnder(roots)) problems.push(`mount left behind: ${mount}`);
  for (const loop of loopDevicesUnder(roots))
    problems.push(`loop device left attached: ${loop.device} -> ${loop.backingFile}`);
  const left = leftInPool(cluster.pool('node-1'));
  if (left.length > 0) problems.push(`left in the pool after csi-sanity's cleanup: ${left.join(', ')}`);
  return problems;
}

/** The driver's logs next to the JUnit report, for CI artifacts (the cluster's root is removed at teardown). */
function keepLogs(cluster: TestCluster, reportDir: string): void {
  const logs = path.join(cluster.root, 'logs');
  if (fs.existsSync(logs)) fs.cpSync(logs, path.join(reportDir, 'logs'), { recursive: true });
}

function exitOf(outcome: SanityOutcome): string {
  return outcome.signal ?? `code ${outcome.exitCode}`;
}

function countsOf(specs: readonly SpecResult[]) {
  const count = (status: SpecResult['status']) => specs.filter((spec) => spec.status === status).length;
  return { passed: count('passed'), failed: count('failed'), skipped: count('skipped'), pending: count('pending') };
}

/** A failure message on one line: Gomega's text without object addresses, gRPC status dumps and padding. */
function firstLines(message: string, limit = 400): string {
  const text = message
    .replace(/<\*?[\w.[\]]+ \| (?:0x[0-9a-f]+|len:\d+, cap:\d+)>:?/g, '')
    .replace(/\s+/g, ' ')
    .replace(/ ?\{ s: \{ s: \{ state: .*?Details: [^,]*, \}, \}, \}/g, '')
    .trim();
  return text.length > limit ? `${text.slice(0, limit)}...` : text;
}

function report(version: string, config: SanityConfig, outcome: SanityOutcome, problems: string[]): string {
  const counts = countsOf(outcome.specs);
  const skipped = outcome.specs.filter((spec) => spec.status === 'skipped');
  const allowed = skipped.filter((spec) => allowedSkip(config.name, spec.message));
  const lines = [
    `csi-sanity ${version}, configuration ${config.name} (backend ${config.backend}, access type ${config.accessType}): ` +
      `${outcome.specs.length} specs: ${counts.passed} passed, ${counts.failed} failed, ` +
      `${counts.skipped} skipped (${allowed.length} allowed, ${skipped.length - allowed.length} not allowed), ` +
      `${counts.pending} pending; exit ${exitOf(outcome)} after ${outcome.seconds.toFixed(0)} s, seed ${outcome.seed}`,
    `  JUnit: ${path.relative(PROJECT_ROOT, outcome.junitFile)}; output: ${path.relative(PROJECT_ROOT, outcome.outputFile)}`,
  ];
  const bySkip = new Map<string, number>();
  for (const spec of allowed) bySkip.set(spec.message, (bySkip.get(spec.message) ?? 0) + 1);
  for (const [message, count] of bySkip) lines.push(`  allowed skip x${count}: ${message}`);
  const unused = ALLOWED_SKIPS.filter(
    (entry) =>
      (entry.configs === 'all' || entry.configs.includes(config.name)) &&
      !skipped.some((spec) => spec.message === entry.message),
  );
  for (const entry of unused) lines.push(`  allowed skip not seen (remove it?): ${entry.message}`);
  for (const problem of problems) lines.push(`  ${problem}`);
  return lines.join('\n');
}
