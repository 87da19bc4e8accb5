import type { Client } from '@temporalio/client';
import { Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { Logger } from '../common/logger';
import { buildOrphanReport, type OrphanKubernetes, type OrphanReport } from './orphan-report';

/** A report asks every live node for its volumes: at most one per this interval, whatever the scrape rate. */
const REPORT_MAX_AGE_MS = 60_000;

/**
 * durable_csi_orphans{kind}: the orphan report's counts (unclaimed, lost, deletion-without-pv, unclaimed-snapshot,
 * unclaimed-group-snapshot, lost-snapshot, snapshot-deletion-without-content, stranded-transfer), from a report at
 * most a minute old, built on the first scrape that needs it. A cluster without the snapshot CRDs has no snapshot
 * kinds, and a report whose transfers were not checked no stranded-transfer: not checked is not zero.
 */
export function registerOrphanMetrics(
  registry: Registry,
  deps: { client: Client; kubernetes: OrphanKubernetes; driverName: string; logger: Logger },
): void {
  let latest: { at: number; report: Promise<OrphanReport> } | undefined;
  const report = () => {
    if (!latest || Date.now() - latest.at > REPORT_MAX_AGE_MS) {
      const building = buildOrphanReport(deps.client, deps.kubernetes, deps.driverName);
      latest = { at: Date.now(), report: building };
      building.catch(() => (latest = undefined)); // a failed report is tried again at the next scrape
    }
    return latest.report;
  };
  new Gauge({
    name: 'durable_csi_orphans',
    help: 'Volumes on a pool with no PV (unclaimed), PVs whose volume no pool reports (lost), pending deletions whose PV is gone (deletion-without-pv), snapshots no VolumeSnapshotContent names (unclaimed-snapshot), group snapshots nothing owns (unclaimed-group-snapshot), VolumeSnapshotContents whose snapshot no pool reports (lost-snapshot), pending snapshot deletions whose VolumeSnapshotContent is gone (snapshot-deletion-without-content), what a terminated move left in a pool (stranded-transfer); no snapshot kinds without the snapshot CRDs, no stranded-transfer where transfers were not checked',
    labelNames: ['kind'],
    registers: [registry],
    async collect() {
      this.reset();
      try {
        const current = await report();
        this.set({ kind: 'unclaimed' }, current.unclaimedVolumes.length);
        this.set({ kind: 'lost' }, current.lostVolumes.length);
        this.set({ kind: 'deletion-without-pv' }, current.deletionsWithoutPv.length);
        if (!current.transfersNotChecked) this.set({ kind: 'stranded-transfer' }, current.strandedTransfers.length);
        if (!current.snapshotCrdsInstalled) return; // snapshots not checked
        this.set({ kind: 'unclaimed-snapshot' }, current.unclaimedSnapshots.length);
        this.set({ kind: 'unclaimed-group-snapshot' }, current.unclaimedGroupSnapshots.length);
        this.set({ kind: 'lost-snapshot' }, current.lostSnapshots.length);
        this.set({ kind: 'snapshot-deletion-without-content' }, current.snapshotDeletionsWithoutContent.length);
      } catch (error) {
        deps.logger.warn({ err: error }, 'could not build the orphan report for metrics');
      }
    },
  });
}
