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
      'volumes on a pool with no PV (unclaimed), PVs whose volume no pool reports (lost), pending deletions ' +
        'whose PV is gone, and the same for snapshots and VolumeSnapshotContents; read-only, deletes nothing',
    )
    .option('--kubeconfig <file>', 'Kubernetes configuration (default: $KUBECONFIG, ~/.kube/config, in-cluster)');
  return addOperatorOptions(command).action(async (flags: OperatorFlags & { kubeconfig?: string }) => {
    // Loaded here, not at CLI start: @kubernetes/client-node is large.
    const { coreApi, customObjectsApi, loadKubeConfig } = await import('../kubernetes/kube-config');
    const { buildOrphanReport } = await import('../kubernetes/orphan-report');
    const config = loadKubeConfig(flags.kubeconfig);
    const kubernetes = { core: coreApi(config), custom: customObjectsApi(config) };
    const report = await withTemporalClient(flags, (client) => buildOrphanReport(client, kubernetes, flags.driverName));
    if (flags.output === 'json') printJson(report);
    else printOrphanReport(report);
  });
}

/** The report as text: a table per kind found, "no orphans" when none is. */
export function printOrphanReport(report: OrphanReport): void {
  const now = report.generatedAt.getTime();
  const found =
    report.unclaimedVolumes.length +
    report.lostVolumes.length +
    report.deletionsWithoutPv.length +
    report.unclaimedSnapshots.length +
    report.unclaimedGroupSnapshots.length +
    report.lostSnapshots.length +
    report.snapshotDeletionsWithoutContent.length +
    report.strandedTransfers.length;
  if (found === 0) process.stdout.write('no orphans\n');
  printSection(
    'Unclaimed: on a pool, with no PV and no pending operation\n',
    ['VOLUME ID', 'NAME', 'NODE', 'SIZE'],
    report.unclaimedVolumes.map((v) => [v.volumeId, v.name, v.nodeId, formatBytes(v.capacityBytes)]),
  );
  printSection(
    '\nLost: a PV whose volume no pool reports\n',
    ['PV', 'CLAIM', 'PHASE', 'NODE', 'VOLUME HANDLE'],
    report.lostVolumes.map((v) => [v.pv, v.claim ?? '', v.phase, v.nodeId ?? '', v.volumeHandle]),
  );
  printSection(
    '\nPending deletions whose PV is gone\n',
    ['VOLUME ID', 'NODE', 'AGE', 'WORKFLOW ID'],
    report.deletionsWithoutPv.map((d) => [d.volumeId, d.nodeId ?? '', ageOf(d.startTime, now), d.workflowId]),
  );
  printSnapshotOrphans(report);
  printSection(
    "\nStranded transfers: what a move left in a node's pool (transfers/) with no move of that key running, as a " +
      'terminated move leaves it; remove it on the node (docs/operations.md, "Stranded transfers")\n',
    ['NODE', 'MOVE KEY', 'WHAT', 'ON DISK', 'CHANGED'],
    report.strandedTransfers.map((t) => [
      t.nodeId,
      t.moveKey,
      t.direction === 'in'
        ? `copy staged here${t.verified ? ' (verified)' : ''}` +
          (t.reservedBytes ? `, holding ${formatBytes(t.reservedBytes)} of the pool's capacity` : '')
        : `offer of snapshot ${t.snapshotKey ?? '?'}`,
      formatBytes(t.bytesOnDisk),
      ageOf(new Date(t.modifiedAt), now),
    ]),
  );
  if (report.transfersNotChecked) process.stdout.write(`\nTransfers not checked: ${report.transfersNotChecked}\n`);
  if (report.uncheckedNodes.length > 0)
    process.stdout.write(`\nNot checked (node did not answer): ${report.uncheckedNodes.join(', ')}\n`);
}

function printSnapshotOrphans(report: OrphanReport): void {
  if (!report.snapshotCrdsInstalled) {
    process.stdout.write(
      '\nSnapshots not checked: the cluster serves no VolumeSnapshotContents (snapshot.storage.k8s.io/v1 CRDs not installed)\n',
    );
    return;
  }
  printSection(
    '\nUnclaimed snapshots: on a pool, named by no VolumeSnapshotContent, no pending operation\n',
    ['SNAPSHOT ID', 'NAME', 'NODE', 'SIZE'],
    report.unclaimedSnapshots.map((s) => [s.snapshotId, s.name, s.nodeId, formatBytes(s.sizeBytes)]),
  );
  printSection(
    '\nUnclaimed group snapshots: members on a pool, named by no VolumeGroupSnapshotContent or VolumeSnapshotContent, ' +
      'no pending operation; a member alone cannot be deleted: `durable-csi snapshots delete GROUP_SNAPSHOT_ID` ' +
      'deletes the whole group\n',
    ['GROUP SNAPSHOT ID', 'NAME', 'NODE', 'MEMBERS', 'SIZE'],
    report.unclaimedGroupSnapshots.map((g) => [
      g.groupSnapshotId,
      g.name,
      g.nodeId,
      g.memberSnapshotIds.join(','),
      formatBytes(g.sizeBytes),
    ]),
  );
  printSection(
    '\nLost snapshots: a VolumeSnapshotContent whose snapshot no pool reports\n',
    ['CONTENT', 'NODE', 'SNAPSHOT HANDLE'],
    report.lostSnapshots.map((s) => [s.content, s.nodeId ?? '', s.snapshotHandle]),
  );
  const now = report.generatedAt.getTime();
  printSection(
    '\nPending snapshot deletions whose VolumeSnapshotContent is gone\n',
    ['SNAPSHOT ID', 'NODE', 'AGE', 'WORKFLOW ID'],
    report.snapshotDeletionsWithoutContent.map((d) => [
      d.snapshotId,
      d.nodeId ?? '',
      ageOf(d.startTime, now),
      d.workflowId,
    ]),
  );
}

/** One table with its title, or nothing when no row was found. */
function printSection(title: string, headers: string[], rows: string[][]): void {
  if (rows.length === 0) return;
  process.stdout.write(title);
  printTable(headers, rows);
}
