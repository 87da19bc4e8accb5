import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../temporal-dev/project-root';
import { parseGinkgoSummary, parseJunit, type GinkgoSummary, type SpecResult } from '../support/ginkgo-junit';

export const PROJECT_ROOT = findProjectRoot();
export const CSI_SANITY = path.join(PROJECT_ROOT, '.tools', 'bin', 'csi-sanity');
const STAMP = path.join(PROJECT_ROOT, '.tools', 'bin', 'csi-sanity.stamp.json');

/** Small volumes: csi-sanity creates dozens, and the loop backend allocates each one as a file. */
export const TEST_VOLUME_BYTES = 64 * 1024 * 1024;
export const TEST_VOLUME_EXPAND_BYTES = 128 * 1024 * 1024;

/** The installed csi-sanity's version, from the stamp scripts/install-tools.js writes; throws when it is missing. */
export function installedCsiSanity(): string {
  const install = 'run "node scripts/install-tools.js" (npm test does it through scripts/setup.js; it needs Go)';
  if (!fs.existsSync(CSI_SANITY)) throw new Error(`${CSI_SANITY} is missing: ${install}`);
  let version: unknown;
  try {
    version = (JSON.parse(fs.readFileSync(STAMP, 'utf8')) as { version?: unknown }).version;
  } catch (error) {
    throw new Error(`${STAMP} is unreadable (${String(error)}): ${install}`);
  }
  if (typeof version !== 'string') throw new Error(`${STAMP} names no version: ${install}`);
  return version;
}

export interface SanityRun {
  nodeEndpoint: string;
  controllerEndpoint: string;
  accessType: 'mount' | 'block';
  /** An existing, empty directory; csi-sanity creates and removes the staging and target parents inside it. */
  workDir: string;
  /** Where the JUnit report and csi-sanity's output are kept. */
  reportDir: string;
  timeoutMs: number;
  /** Ginkgo's random seed, to replay an order (SANITY_SEED); Ginkgo picks one when absent. */
  seed?: string;
}

export interface SanityOutcome {
  args: string[];
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  specs: SpecResult[];
  summary: GinkgoSummary | undefined;
  seed: string | undefined;
  junitFile: string;
  outputFile: string;
  output: string;
  seconds: number;
}

export function sanityArgs(run: SanityRun, junitFile: string): string[] {
  return [
    `--csi.endpoint=${run.nodeEndpoint}`,
    `--csi.controllerendpoint=${run.controllerEndpoint}`,
    // Neither exists yet: csi-sanity mkdirs each before a spec and removes it after. The target path it passes
    // to NodePublishVolume is <mountdir>/target, which the driver creates (CSI: the CO creates only its parent).
    `--csi.stagingdir=${path.join(run.workDir, 'staging')}`,
    `--csi.mountdir=${path.join(run.workDir, 'mount')}`,
    `--csi.testvolumeaccesstype=${run.accessType}`,
    `--csi.testvolumesize=${TEST_VOLUME_BYTES}`,
    `--csi.testvolumeexpandsize=${TEST_VOLUME_EXPAND_BYTES}`,
    // Reaches the attach-limit spec's own check: our nodes report max_volumes_per_node 0 (no limit).
    '--csi.testnodevolumeattachlimit',
    `--ginkgo.junit-report=${junitFile}`,
    '--ginkgo.no-color',
    `--ginkgo.timeout=${Math.max(60, Math.floor(run.timeoutMs / 1000) - 30)}s`,
    ...(run.seed ? [`--ginkgo.seed=${run.seed}`] : []),
  ];
}

/** Runs csi-sanity to completion (or kills it at timeoutMs) and reads its JUnit report. */
export async function runCsiSanity(run: SanityRun): Promise<SanityOutcome> {
  fs.mkdirSync(run.reportDir, { recursive: true });
  const junitFile = path.join(run.reportDir, 'junit.xml');
  const outputFile = path.join(run.reportDir, 'output.log');
  fs.rmSync(junitFile, { force: true });
  const args = sanityArgs(run, junitFile);
  const started = Date.now();
  const child = spawn(CSI_SANITY, args, { cwd: run.workDir, stdio: ['ignore', 'pipe', 'pipe'] });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), run.timeoutMs);
  const { exitCode, signal } = await new Promise<{ exitCode: number | null; signal: NodeJS.Signals | null }>(
    (resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code, closedBy) => resolve({ exitCode: code, signal: closedBy }));
    },
  ).finally(() => clearTimeout(timer));
  const output = Buffer.concat(chunks).toString('utf8');
  fs.writeFileSync(outputFile, `$ ${CSI_SANITY} ${args.join(' ')}\n${output}`);
  const specs = fs.existsSync(junitFile) ? parseJunit(fs.readFileSync(junitFile, 'utf8')) : [];
  return {
    args,
    exitCode,
    signal,
    specs,
    summary: parseGinkgoSummary(output),
    seed: /Random Seed: (\d+)/.exec(output)?.[1],
    junitFile,
    outputFile,
    output,
    seconds: (Date.now() - started) / 1000,
  };
}
