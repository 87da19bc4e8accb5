/**
 * The soak: a real durable-csi deployment (a Temporal server with a persisted database, two controllers, N node
 * agents, all separate OS processes) under a seeded workload and fault schedule, ending in a leak audit that reads
 * every pool from disk. `npm run soak -- --ops 200`; see docs/soak.md. Exit code 1 when anything leaked, was
 * lost, duplicated, left running, or a driver process or answer misbehaved.
 */
import { Client, Connection } from '@temporalio/client';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { listNodeViews } from '../../node-records/reads';
import { connectionOptions } from '../../temporal/config';
import { startRunTemporal } from '../support/run-temporal';
import { auditPools, pendingWorkflows, snapshotCopyProbe } from './audit';
import {
  currentBuild,
  defaultBaselineRev,
  prepareBaseline,
  supportsGroups,
  supportsSnapshots,
  type Build,
} from './baseline';
import { Cluster } from './cluster';
import { planSchedule, runSchedule } from './faults/schedule';
import type { FaultContext, FaultRecord, TemporalControl } from './faults/types';
import { Model } from './model';
import { ROOT_ONLY_FAULTS, isRoot, nodeBackends, parseOptions, replayCommand } from './options';
import { Prng } from './prng';
import {
  formatReport,
  problemsOf,
  scanLogs,
  summarizeFault,
  summarizeWorkload,
  writeReport,
  type SoakReport,
} from './report';
import { connectController, Workload } from './workload';

const started = Date.now();
const progress = (message: string) =>
  process.stderr.write(`[soak +${Math.round((Date.now() - started) / 1000)}s] ${message}\n`);

async function main(): Promise<number> {
  const options = parseOptions(process.argv);
  const prng = new Prng(options.seed);
  const workDir = options.workDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'dsoak-'));
  fs.mkdirSync(workDir, { recursive: true });
  const driverName = `soak-${options.seed.toString(36)}.durable-csi.io`;
  progress(`seed ${options.seed}; work dir ${workDir}; replay: ${replayCommand(options)}`);
  if (!isRoot()) progress(`not root: --faults all leaves out ${ROOT_ONLY_FAULTS.join(', ')} (loop devices, mounts)`);

  const current = currentBuild();
  let baseline: Build | undefined;
  const cleanups: (() => Promise<void>)[] = [];
  const cleanUp = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) {
      await cleanup().catch((error: unknown) => progress(`cleanup failed: ${String(error)}`));
    }
  };
  process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));
  process.once('SIGTERM', () => void cleanUp().finally(() => process.exit(143)));

  const model = new Model(options.recurring);
  let records: FaultRecord[] = [];
  let cluster: Cluster | undefined;
  let workload: Workload | undefined;
  const report: SoakReport = {
    ok: false,
    problems: [],
    command: `node ${path.relative(process.cwd(), process.argv[1] ?? 'main.js')} ${process.argv.slice(2).join(' ')}`,
    replay: replayCommand(options),
    options,
    startedAt: new Date(started).toISOString(),
    durationMs: 0,
    workDir,
    driverName,
    workload: summarizeWorkload([], [], []),
    faults: [],
    driverIssues: { unexpectedExits: [], logFindings: [] },
    ops: [],
  };
  let aborted: string | undefined;
  try {
    if (options.faults.includes('version-skew')) {
      baseline = prepareBaseline(options.baseline ?? defaultBaselineRev(), progress);
      report.baseline = { rev: baseline.rev, sha: baseline.sha, typeErrors: baseline.typeErrors, adaptations: [] };
    }
    const server = await startRunTemporal(options.temporal, workDir, progress);
    cleanups.push(() => server.stop());
    const temporal: TemporalControl = {
      address: server.config.address,
      config: server.config,
      prod: server.prod,
      restart: (signal, downMs) => server.restart(signal, downMs),
      async availableBytes() {
        const connection = await Connection.connect(connectionOptions(server.config));
        try {
          const views = await listNodeViews(new Client({ connection }), driverName);
          return new Map(views.map((view) => [view.nodeId, view.availableBytes]));
        } finally {
          await connection.close();
        }
      },
    };

    const activeCluster = new Cluster({
      root: workDir,
      driverName,
      temporalFlags: server.flags,
      nodes: options.nodes,
      backends: nodeBackends(options),
      capacity: options.capacity,
      callWait: options.callWait,
      progress,
    });
    cluster = activeCluster;
    model.copyOnDisk = snapshotCopyProbe(activeCluster);
    cleanups.push(async () => activeCluster.releaseMounts());
    cleanups.push(() => activeCluster.stopAll());
    const first = baseline ?? current;
    // A baseline without a backend the nodes use cannot run node agents: version skew then covers the controllers only.
    const missing = [...new Set(nodeBackends(options))].filter(
      (backend) => baseline && !new RegExp(`\\b${backend}\\b`).test(baseline.help.node),
    );
    const firstNodes = missing.length > 0 ? current : first;
    if (firstNodes !== first)
      activeCluster.adaptations.add(`old node agents: no ${missing.join(', ')} backend; new ones only`);
    progress(`starting ${options.nodes} node agents and 2 controllers (${first.label} build), driver ${driverName}`);
    await activeCluster.startAll(first, firstNodes);

    const clients = activeCluster.controllers.map((controller) =>
      connectController(
        controller.name,
        controller.endpoint,
        () => supportsSnapshots(controller.build),
        () => supportsGroups(controller.build),
      ),
    );
    if (baseline && !supportsSnapshots(baseline))
      activeCluster.adaptations.add('old controllers: no --snapshots; snapshot calls and restores go to new ones only');
    if (baseline && !supportsGroups(baseline))
      activeCluster.adaptations.add('old controllers: no GroupController; group snapshot calls go to new ones only');
    cleanups.push(async () => clients.forEach((client) => client.close()));
    const activeWorkload = new Workload(model, prng.fork(), clients, {
      ops: options.ops,
      concurrency: options.concurrency,
      callTimeoutMs: options.callTimeoutMs,
      opBudgetMs: options.opBudgetMs,
      nodes: activeCluster.nodes.map((node) => node.name),
    });
    workload = activeWorkload;
    const background = activeWorkload.background();

    const context: FaultContext = {
      cluster: activeCluster,
      workload: activeWorkload,
      prng: prng.fork(),
      options,
      builds: { current, baseline },
      temporal,
      progress,
    };
    const plan = planSchedule(options, prng.fork());
    progress(`fault schedule: ${plan.map((item) => item.fault.kind).join(', ') || 'none'}`);
    records = await runSchedule(context, plan);
    progress(
      `faults done; waiting for the workload to issue its last operations (${activeWorkload.issued}/${options.ops})`,
    );
    await background;

    for (const process of activeCluster.all()) {
      if (!process.alive() || process.build !== current) {
        progress(`${process.name} is ${process.alive() ? 'on the old build' : 'down'}: starting it (new build)`);
        await process.start(current);
      }
    }
    progress(
      `settling: ${activeWorkload.pendingCount()} operations still retrying (at most ${options.settleTimeoutMs / 1000} s)`,
    );
    await activeWorkload.settle(options.settleTimeoutMs);

    progress('checking for running workflows');
    const connection = await Connection.connect(connectionOptions(server.config));
    let pending;
    try {
      pending = await pendingWorkflows(new Client({ connection }), driverName, 60_000);
    } finally {
      await connection.close();
    }
    progress('stopping every driver process, then reading every pool from disk');
    await activeCluster.stopAll();
    report.audit = auditPools(activeCluster, model, pending);
  } catch (error) {
    aborted = error instanceof Error ? (error.stack ?? error.message) : String(error);
    progress(`aborted: ${aborted}`);
    workload?.stopBackground();
  } finally {
    await cleanUp();
  }

  report.durationMs = Date.now() - started;
  report.workload = summarizeWorkload(model.ops, workload?.unexpected ?? [], model.anomalies, model.forgotten);
  report.faults = records.map((record) => summarizeFault(record, model.ops));
  if (cluster) {
    report.driverIssues = { unexpectedExits: cluster.unexpectedExits, logFindings: scanLogs(cluster) };
    if (report.baseline) report.baseline.adaptations = [...cluster.adaptations];
  }
  report.ops = model.ops;
  report.problems = [...(aborted ? [`aborted: ${aborted.split('\n')[0]}`] : []), ...problemsOf(report)];
  report.ok = report.problems.length === 0;
  process.stdout.write(`${formatReport(report)}\n`);
  writeReport(options.report, report);
  progress(`wrote ${options.report}`);
  if (report.ok && !options.keep) fs.rmSync(workDir, { recursive: true, force: true });
  else progress(`kept ${workDir} (logs in ${path.join(workDir, 'logs')})`);
  return report.ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`soak failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
