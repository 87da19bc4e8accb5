/**
 * The controller's memory over many create+delete lifecycles (issue 38): `node dist/test/bench/memory.js
 * --lifecycles 20000`. One real controller and node agent (from dist/) on a dev server; after a warm-up (which fills
 * the workflow cache and compiles code) the lifecycles run in batches, and after each batch the benchmark prints
 * the controller's RSS (anonymous part), each of its threads' live heap (after a full collection, through
 * test/bench/heap-probe.ts: the main thread and the workflow thread are two V8 isolates), its external and array
 * buffer memory, and the agent's RSS and heap. Heap snapshots of every controller thread at the start and the end
 * (`--snapshots <dir>`) are compared by constructor (test/bench/heap-diff.ts): what grew is named. `--minutes` stops
 * early; the growth per 1,000 lifecycles is then what the benchmark reports. Figures in docs/scale.md ("Memory").
 */
import { Command } from 'commander';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findProjectRoot } from '../../common/project-root';
import { startDevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster } from '../support/cluster';
import { integer } from '../support/option-parsers';
import { runDurableLevel, type DurableTarget } from './durable';
import { formatGrowth, summarizeSnapshot } from './heap-diff';
import { probeMemory, probeSnapshot, withHeapProbe, type ProbeMemory } from './heap-probe';
import { CostMeter } from './phase-cost';
import { ProcessWatch, residentMbOf } from './process-usage';
import { slope } from './stats';

interface Options {
  lifecycles: number;
  batch: number;
  concurrency: number;
  warmup: number;
  minutes: number;
  snapshots?: string;
  /** False with --no-heap-snapshots: RSS without what writing snapshots leaves in the allocator. */
  heapSnapshots: boolean;
  out: string;
}

export interface MemorySample {
  lifecycles: number;
  seconds: number;
  controller: ProcessFigures;
  agent: ProcessFigures;
}

/** One process's memory, MB (10^6 bytes); heaps after a full collection. */
export interface ProcessFigures {
  rss: number;
  anon: number;
  /** Live heap of each thread, main first. */
  heaps: number[];
  external: number;
  arrayBuffers: number;
}

const positiveInt = integer(1);
const MB = 1e6;

function parseOptions(argv: string[]): Options {
  return new Command('memory')
    .option('--lifecycles <n>', 'create+delete lifecycles after the warm-up', positiveInt, 20_000)
    .option('--batch <n>', 'lifecycles between two samples', positiveInt, 1_000)
    .option('--concurrency <n>', 'calls in flight', positiveInt, 8)
    .option('--warmup <n>', 'unmeasured lifecycles first (fills the workflow cache, compiles code)', integer(0), 200)
    .option('--minutes <n>', 'stop after the batch that ends past this many minutes', positiveInt, 30)
    .option('--snapshots <dir>', "keep the controller's heap snapshots (start, end) in dir")
    .option(
      '--no-heap-snapshots',
      "take none: writing one leaves the controller's allocator about 100 MB larger, which the RSS figures then include",
    )
    .option('--out <file>', 'JSON report', path.join(findProjectRoot(), 'test-artifacts', 'bench-memory.json'))
    .parse(argv)
    .opts<Options>();
}

const progress = (message: string) => process.stderr.write(`[memory ${new Date().toISOString()}] ${message}\n`);

async function figuresOf(probeDir: string, pid: number): Promise<ProcessFigures> {
  const memory: ProbeMemory = await probeMemory(probeDir, pid, true);
  const resident = residentMbOf(pid);
  return {
    rss: resident?.rss ?? NaN,
    anon: resident?.anon ?? NaN,
    heaps: memory.threads.map((thread) => thread.heapUsed / MB),
    external: memory.external / MB,
    arrayBuffers: memory.arrayBuffers / MB,
  };
}

const fixed = (value: number) => value.toFixed(1);

function sampleLine(sample: MemorySample): string {
  const { controller, agent } = sample;
  return [
    String(sample.lifecycles).padStart(7),
    String(Math.round(sample.seconds)).padStart(6),
    `${fixed(controller.rss)} (${fixed(controller.anon)})`.padStart(14),
    controller.heaps.map(fixed).join(' / ').padStart(14),
    fixed(controller.external).padStart(8),
    fixed(controller.arrayBuffers).padStart(7),
    `${fixed(agent.rss)} / ${fixed(agent.heaps[0] ?? NaN)}`.padStart(14),
  ].join(' ');
}

const HEADER =
  'lifecycles   secs  ctl RSS (anon)   heaps main/wf  external  arrbuf  agent RSS/heap   (MB; heaps after a full GC)';

/** Least-squares slope of `value` against the lifecycles, per 1,000 lifecycles. */
export function growthPerThousand(samples: readonly MemorySample[], value: (sample: MemorySample) => number): number {
  return slope(
    samples.map((sample) => sample.lifecycles / 1000),
    samples.map(value),
  );
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv);
  const runId = Date.now().toString(36);
  const cleanups: (() => Promise<void>)[] = [];
  const cleanUp = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((error: unknown) => progress(String(error)));
  };
  process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));
  const problems: string[] = [];
  const samples: MemorySample[] = [];
  let beforeSnapshot: MemorySample | undefined;
  const diffs: Record<string, string[]> = {};
  try {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-bench-memory-'));
    cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
    const probeDir = options.snapshots ? path.resolve(options.snapshots) : path.join(dataDir, 'probe');
    fs.mkdirSync(probeDir, { recursive: true });
    progress('starting the Temporal dev server');
    const server = await startDevServer({ dataDir, port: await findFreePort(), headless: true });
    cleanups.push(() => server.stop());
    // Read by TestCluster, and the probe loaded into the processes it spawns (after this).
    Object.assign(process.env, withHeapProbe(process.env, probeDir), {
      DURABLE_CSI_TEST_TEMPORAL: server.address,
      DURABLE_CSI_TEST_TEMPORAL_CONFIG: JSON.stringify({ address: server.address, namespace: server.namespace }),
    });
    const cluster = new TestCluster('memory', { logLevel: 'info' });
    cleanups.push(() => cluster.teardown());
    const controller = await cluster.startController('controller', ['--call-wait', '30s']);
    const agent = await cluster.startNode('node-a', { capacity: '1Ti' });
    const pids = { controller: controller.child.pid ?? 0, agent: agent.child.pid ?? 0 };
    const target: DurableTarget = {
      cluster,
      clients: cluster.csi(controller.endpoint),
      nodes: ['node-a'],
      rpcTimeoutMs: 60_000,
      retryBudgetMs: 300_000,
      topology: 'node',
    };
    const meter = new CostMeter(new ProcessWatch(), undefined);
    progress(`warm-up: ${options.warmup} lifecycles`);
    for (let done = 0; done < options.warmup; done += 100) {
      const ops = Math.min(100, options.warmup - done);
      const level = await runDurableLevel(target, meter, `${runId}-warm${done}`, options.concurrency, ops);
      if (level.create.failures + level.delete.failures > 0) problems.push(`warm-up: calls failed`);
    }
    const sample = async (lifecycles: number, started: number): Promise<MemorySample> => ({
      lifecycles,
      seconds: (performance.now() - started) / 1000,
      controller: await figuresOf(probeDir, pids.controller),
      agent: await figuresOf(probeDir, pids.agent),
    });
    const started = performance.now();
    // Writing a snapshot costs the process memory that the allocator keeps: the samples' RSS includes it.
    beforeSnapshot = await sample(0, started);
    const takeSnapshots = (label: string) =>
      options.heapSnapshots ? probeSnapshot(probeDir, pids.controller, label) : Promise.resolve([]);
    const startSnapshots = await takeSnapshots('start');
    process.stdout.write(`${HEADER}\n${sampleLine(beforeSnapshot)}   (before the first heap snapshot)\n`);
    samples.push(await sample(0, started));
    process.stdout.write(`${sampleLine(samples[0]!)}\n`);
    let done = 0;
    while (done < options.lifecycles && performance.now() - started < options.minutes * 60_000) {
      const ops = Math.min(options.batch, options.lifecycles - done);
      const level = await runDurableLevel(target, meter, `${runId}-l${done}`, options.concurrency, ops);
      if (level.create.failures + level.delete.failures > 0 || level.leftovers.length > 0)
        problems.push(`batch at ${done}: ${level.create.failures} creates and ${level.delete.failures} deletes failed`);
      done += ops;
      samples.push(await sample(done, started));
      process.stdout.write(`${sampleLine(samples[samples.length - 1]!)}\n`);
    }
    const endSnapshots = await takeSnapshots('end');
    // From the first batch on, as in lifecycles.ts: the first fills the caches and compiles code.
    const rate = (value: (s: MemorySample) => number) => fixed(growthPerThousand(samples.slice(1), value));
    process.stdout.write(
      `\n${done} lifecycles in ${Math.round(samples[samples.length - 1]!.seconds)} s (concurrency ` +
        `${options.concurrency}); growth per 1,000 after the first batch (least squares): controller RSS ${rate((s) => s.controller.rss)} ` +
        `MB, main heap ${rate((s) => s.controller.heaps[0] ?? NaN)} MB, workflow thread heap ` +
        `${rate((s) => s.controller.heaps[1] ?? NaN)} MB; agent RSS ${rate((s) => s.agent.rss)} MB\n` +
        `controller RSS after the first batch -> at the end (the lower of the last two samples): ` +
        `${fixed(samples[1]?.controller.rss ?? NaN)} -> ${fixed(Math.min(...samples.slice(-2).map((s) => s.controller.rss)))} MB\n`,
    );
    // Snapshots by thread: the file names end in -t<threadId>.heapsnapshot.
    const byThread = (files: string[]) =>
      new Map(files.map((file) => [/-t(\d+)\.heapsnapshot$/.exec(file)?.[1], file]));
    const ends = byThread(endSnapshots);
    for (const [thread, start] of byThread(startSnapshots)) {
      const end = thread === undefined ? undefined : ends.get(thread);
      if (!end || thread === undefined) continue;
      diffs[`thread ${thread}`] = formatGrowth(summarizeSnapshot(start), summarizeSnapshot(end));
      process.stdout.write(`\ncontroller thread ${thread}, start -> end: ${diffs[`thread ${thread}`]!.join('\n')}\n`);
    }
    if (!options.snapshots) [...startSnapshots, ...endSnapshots].forEach((file) => fs.rmSync(file, { force: true }));
  } catch (error) {
    problems.push(`aborted: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    await cleanUp();
  }
  fs.mkdirSync(path.dirname(options.out), { recursive: true });
  fs.writeFileSync(options.out, `${JSON.stringify({ options, beforeSnapshot, samples, diffs, problems }, null, 2)}\n`);
  for (const problem of problems) process.stdout.write(`problem: ${problem}\n`);
  progress(`wrote ${options.out}`);
  return problems.length === 0 ? 0 : 1;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`memory: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}
