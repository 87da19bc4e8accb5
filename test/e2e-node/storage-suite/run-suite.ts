import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../../temporal-dev/project-root';
import { k8sTools } from '../../e2e-k8s/tools';
import { parseGinkgoSummary, parseJunit, type GinkgoSummary, type SpecResult } from '../../support/ginkgo-junit';
import type { RealCluster } from '../real-cluster';
import { ciSkip } from './scope';
import { skipPattern } from './skips';

const ROOT = findProjectRoot();
/** The driver YAMLs, one per StorageClass (this directory; docs/storage-suite.md). */
export type SuiteDriver = 'loop-ext4' | 'loop-xfs' | 'dir';

export interface SuiteRun {
  driver: SuiteDriver;
  /** Ginkgo focus (a regular expression over the spec's full text); always within External.Storage. */
  focus: string;
  timeoutMs: number;
}

export interface SuiteOutcome {
  driver: SuiteDriver;
  specs: SpecResult[];
  summary: GinkgoSummary | undefined;
  exitCode: number | null;
  junitFile: string;
  outputFile: string;
  seconds: number;
}

export function driverYaml(driver: SuiteDriver): string {
  return path.join(ROOT, 'test', 'e2e-node', 'storage-suite', `${driver}.yaml`);
}

/** The suite's binary and Ginkgo's CLI (scripts/install-k8s-tools.js, set storage-suite); missing fails. */
export function suiteBinaries(): { suite: string; ginkgo: string } {
  const tools = k8sTools();
  for (const binary of [tools['e2e-storage.test'], tools.ginkgo])
    if (!binary || !fs.existsSync(binary))
      throw new Error(`${binary} is missing: run "node scripts/install-k8s-tools.js storage-suite"`);
  return { suite: tools['e2e-storage.test'], ginkgo: tools.ginkgo };
}

/**
 * Parallel Ginkgo processes: the specs mostly wait on kubelet and the sidecars, so several share two cores well;
 * [Serial] specs still run alone at the end. DURABLE_CSI_STORAGE_SUITE_PROCS overrides.
 */
export function suiteProcs(): number {
  const procs = Number(process.env.DURABLE_CSI_STORAGE_SUITE_PROCS ?? 4);
  if (!Number.isInteger(procs) || procs < 1) throw new Error(`DURABLE_CSI_STORAGE_SUITE_PROCS=${procs}: not a count`);
  return procs;
}

/** Ginkgo's flags, the suite's binary, then the suite's own: the cluster's kubeconfig and the driver's YAML. */
export function suiteArgs(node: RealCluster, run: SuiteRun, reportDir: string, suite: string): string[] {
  return [
    `--procs=${suiteProcs()}`,
    `--focus=${run.focus}`,
    `--skip=${[skipPattern(run.driver), ciSkip(run.driver)].filter(Boolean).join('|')}`,
    `--junit-report=${path.join(reportDir, 'junit.xml')}`,
    `--timeout=${Math.floor(run.timeoutMs / 1000)}s`,
    '--no-color',
    '-v',
    suite,
    '--',
    `-kubeconfig=${node.plane.adminKubeconfig()}`,
    `-kubectl-path=${node.tools.kubectl}`,
    `-storage.testdriver=${driverYaml(run.driver)}`,
    `-report-dir=${reportDir}`,
    // The suite's pre-flight waits for every node to be Ready.
    '-allowed-not-ready-nodes=0',
  ];
}

/**
 * Runs the suite inside the cluster's namespaces (a single node's own, where its kubelet is; the control plane's for
 * several, which reach every node), keeps the JUnit report and the full output under
 * test-artifacts/storage-suite/<driver><reportSuffix>/ and returns what it found.
 */
export async function runSuite(node: RealCluster, run: SuiteRun, reportSuffix = ''): Promise<SuiteOutcome> {
  const reportDir = path.join(ROOT, 'test-artifacts', 'storage-suite', `${run.driver}${reportSuffix}`);
  fs.rmSync(reportDir, { recursive: true, force: true });
  fs.mkdirSync(reportDir, { recursive: true });
  const outputFile = path.join(reportDir, 'output.log');
  const { suite, ginkgo } = suiteBinaries();
  const where = node.nodes.length === 1 ? node.nodes[0]?.ns : node.controlNs;
  if (!where) throw new Error('the storage suite needs a started cluster');
  const [command, args] = where.launch(ginkgo, suiteArgs(node, run, reportDir, suite));
  const started = Date.now();
  const out = fs.openSync(outputFile, 'w');
  const exitCode = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(command, args, { cwd: reportDir, stdio: ['ignore', out, out] });
    const timer = setTimeout(() => child.kill('SIGKILL'), run.timeoutMs + 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
  fs.closeSync(out);
  const junitFile = path.join(reportDir, 'junit.xml');
  const output = fs.readFileSync(outputFile, 'utf8');
  const specs = fs.existsSync(junitFile) ? parseJunit(fs.readFileSync(junitFile, 'utf8')) : [];
  return {
    driver: run.driver,
    specs,
    summary: parseGinkgoSummary(output),
    exitCode,
    junitFile,
    outputFile,
    seconds: (Date.now() - started) / 1000,
  };
}

export interface SuiteCounts {
  run: number;
  passed: number;
  failed: number;
  skipped: number;
  /** Of the skipped: those the suite skipped itself (with a message), the rest were not selected. */
  selfSkipped: number;
}

/** The report's specs ([It]), without Ginkgo's suite nodes ([ReportAfterSuite] and the like). */
export function itSpecs(specs: SpecResult[]): SpecResult[] {
  return specs.filter((spec) => spec.name.startsWith('[It] '));
}

/** Specs run (passed or failed), and skipped: by the suite itself, or not selected by the focus and skip list. */
export function countSpecs(all: SpecResult[]): SuiteCounts {
  const specs = itSpecs(all);
  const count = (status: SpecResult['status']): number => specs.filter((spec) => spec.status === status).length;
  return {
    run: count('passed') + count('failed'),
    passed: count('passed'),
    failed: count('failed'),
    skipped: count('skipped') + count('pending'),
    selfSkipped: specs.filter((spec) => spec.status === 'skipped' && spec.message !== '').length,
  };
}

export function report(outcome: SuiteOutcome): string {
  const counts = countSpecs(outcome.specs);
  const failed = outcome.specs.filter((spec) => spec.status === 'failed');
  return [
    `storage suite, driver ${outcome.driver}: ${counts.run} run, ${counts.passed} passed, ${counts.failed} failed, ` +
      `${counts.skipped} skipped (${counts.selfSkipped} by the suite, ${counts.skipped - counts.selfSkipped} not ` +
      `selected), in ${outcome.seconds.toFixed(0)} s (exit ${outcome.exitCode})`,
    `  JUnit: ${path.relative(ROOT, outcome.junitFile)}; output: ${path.relative(ROOT, outcome.outputFile)}`,
    ...failed.map((spec) => `  FAILED ${spec.name}\n    ${spec.message.split('\n').slice(0, 6).join('\n    ')}`),
  ].join('\n');
}
