import { deleteSnapshotWorkflowId, deleteWorkflowId, formatSnapshotId, formatVolumeId } from '../../../common/names';
import { printOrphanReport } from '../../../cli/volumes-orphans-command';
import type { OrphanReport } from '../../../kubernetes/orphan-report';

const DRIVER = 'durable-csi.io';
const PARTS = { nodeId: 'node-1', poolIdPrefix: '0123456789abcdef', key: 'fedcba9876543210fedcba9876543210' };
const VOLUME = formatVolumeId(PARTS);
const SNAPSHOT = formatSnapshotId(PARTS);
const NOW = new Date('2026-01-02T03:04:05.000Z');
const MINUTES_AGO = (minutes: number) => new Date(NOW.getTime() - minutes * 60_000);

function report(fields: Partial<OrphanReport> = {}): OrphanReport {
  return {
    generatedAt: NOW,
    unclaimedVolumes: [],
    lostVolumes: [],
    deletionsWithoutPv: [],
    unclaimedSnapshots: [],
    unclaimedGroupSnapshots: [],
    lostSnapshots: [],
    snapshotDeletionsWithoutContent: [],
    strandedTransfers: [],
    snapshotCrdsInstalled: true,
    uncheckedNodes: [],
    ...fields,
  };
}

function printed(value: OrphanReport): string {
  const written: string[] = [];
  const write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    written.push(String(chunk));
    return true;
  });
  try {
    printOrphanReport(value);
  } finally {
    write.mockRestore();
  }
  return written.join('');
}

describe('volumes orphans as text', () => {
  it('says so when nothing is found', () => {
    expect(printed(report())).toBe('no orphans\n');
  });

  it('lists pending deletions whose PV or VolumeSnapshotContent is gone, each under its own heading', () => {
    const volumeDeletion = deleteWorkflowId(DRIVER, VOLUME);
    const snapshotDeletion = deleteSnapshotWorkflowId(DRIVER, SNAPSHOT);
    const text = printed(
      report({
        deletionsWithoutPv: [{ workflowId: volumeDeletion, volumeId: VOLUME, nodeId: 'node-1', startTime: NOW }],
        snapshotDeletionsWithoutContent: [
          { workflowId: snapshotDeletion, snapshotId: SNAPSHOT, nodeId: 'node-1', startTime: MINUTES_AGO(5) },
        ],
      }),
    );
    expect(text).not.toContain('no orphans');
    expect(text).toContain('\nPending deletions whose PV is gone\n');
    expect(text).toMatch(
      new RegExp(
        '\\nPending snapshot deletions whose VolumeSnapshotContent is gone\\nSNAPSHOT ID +NODE +AGE +WORKFLOW ID\\n' +
          `${SNAPSHOT} +node-1 +5m0s +${snapshotDeletion}\\n$`,
      ),
    );
  });

  it('lists what a terminated move left on each node, or says the transfers were not checked and why', () => {
    const moveKey = '0123456789abcdef0123456789abcdef';
    const text = printed(
      report({
        strandedTransfers: [
          {
            nodeId: 'node-2',
            moveKey,
            direction: 'in',
            bytesOnDisk: 32 * 1024 * 1024,
            modifiedAt: MINUTES_AGO(90).toISOString(),
            verified: false,
            reservedBytes: 64 * 1024 * 1024,
          },
          {
            nodeId: 'node-1',
            moveKey,
            direction: 'out',
            bytesOnDisk: 4096,
            modifiedAt: MINUTES_AGO(91).toISOString(),
            snapshotKey: PARTS.key,
          },
        ],
      }),
    );
    expect(text).not.toContain('no orphans');
    expect(text).toMatch(
      /\nStranded transfers: .*docs\/operations\.md, "Stranded transfers"\)\nNODE +MOVE KEY +WHAT +ON DISK +CHANGED\n/,
    );
    expect(text).toMatch(
      new RegExp(`node-2 +${moveKey} +copy staged here, holding 64Mi of the pool's capacity +32Mi +1h30m`),
    );
    expect(text).toMatch(new RegExp(`node-1 +${moveKey} +offer of snapshot ${PARTS.key} +4Ki +1h31m`));
    const old = printed(report({ transfersNotChecked: 'Workflow type listTransfersPage not found' }));
    expect(old).toContain('no orphans\n');
    expect(old).toContain('\nTransfers not checked: Workflow type listTransfersPage not found\n');
  });

  it('without the snapshot CRDs says snapshots were not checked, and lists no snapshot kind', () => {
    const text = printed(report({ snapshotCrdsInstalled: false }));
    expect(text).toContain('\nSnapshots not checked: the cluster serves no VolumeSnapshotContents');
    expect(text).not.toContain('snapshot deletions');
  });
});
