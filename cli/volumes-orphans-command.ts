import { Command } from 'commander';
import { formatBytes } from '../common/quantity';
import type { OrphanReport } from '../kubernetes/orphan-report';
import { addOperatorOptions, ageOf, printJson, withTemporalClient } from './operator-options';
import type { OperatorFlags } from './operator-options';
import { printTable } from './table';

/** `volumes orphans`: where the pools and Kubernetes disagree. Read-only; reads Temporal, the pools and the PVs. */
export function orphansCommand(): Command {
  const command = new Command('orphans')
    .description(
      'volumes on a pool with no PV (unclaimed), PVs whose volume no pool reports (lost), and pending deletions ' +
        'whose PV is gone; read-only, deletes nothing',
    )
    .option('--kubeconfig <file>', 'Kubernetes configuration (default: $KUBECONFIG, ~/.kube/config, in-cluster)');
  return addOperatorOptions(command).action(async (flags: OperatorFlags & { kubeconfig?: string }) => {
    // Loaded here, not at CLI start: @kubernetes/client-node is large.
    const { coreApi, loadKubeConfig } = await import('../kubernetes/kube-config');
    const { buildOrphanReport } = await import('../kubernetes/orphan-report');
    const core = coreApi(loadKubeConfig(flags.kubeconfig));
    const report = await withTemporalClient(flags, (client) => buildOrphanReport(client, core, flags.driverName));
    if (flags.output === 'json') printJson(report);
    else printReport(report);
  });
}

function printReport(report: OrphanReport): void {
  const now = report.generatedAt.getTime();
  const found = report.unclaimedVolumes.length + report.lostVolumes.length + report.deletionsWithoutPv.length;
  if (found === 0) process.stdout.write('no orphans\n');
  if (report.unclaimedVolumes.length > 0) {
    process.stdout.write('Unclaimed: on a pool, with no PV and no pending operation\n');
    printTable(
      ['VOLUME ID', 'NAME', 'NODE', 'SIZE'],
      report.unclaimedVolumes.map((v) => [v.volumeId, v.name, v.nodeId, formatBytes(v.capacityBytes)]),
    );
  }
  if (report.lostVolumes.length > 0) {
    process.stdout.write('\nLost: a PV whose volume no pool reports\n');
    printTable(
      ['PV', 'CLAIM', 'PHASE', 'NODE', 'VOLUME HANDLE'],
      report.lostVolumes.map((v) => [v.pv, v.claim ?? '', v.phase, v.nodeId ?? '', v.volumeHandle]),
    );
  }
  if (report.deletionsWithoutPv.length > 0) {
    process.stdout.write('\nPending deletions whose PV is gone\n');
    printTable(
      ['VOLUME ID', 'NODE', 'AGE', 'WORKFLOW ID'],
      report.deletionsWithoutPv.map((d) => [d.volumeId, d.nodeId ?? '', ageOf(d.startTime, now), d.workflowId]),
    );
  }
  if (report.uncheckedNodes.length > 0)
    process.stdout.write(`\nNot checked (node did not answer): ${report.uncheckedNodes.join(', ')}\n`);
}
