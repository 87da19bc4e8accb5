import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { Registry } from 'prom-client';
import {
  createSnapshotWorkflowId,
  deleteSnapshotWorkflowId,
  deleteWorkflowId,
  formatSnapshotId,
  formatVolumeId,
} from '../../../common/names';
import type { Logger } from '../../../common/logger';
import { registerOrphanMetrics } from '../../../kubernetes/orphan-metrics';
import { buildOrphanReport } from '../../../kubernetes/orphan-report';
import type { OperationSummary } from '../../../operations/pending-operations';

// Temporal's side of the report (the pools' listings and the pending operations) is what these tests set.
const mockTemporal = {
  volumes: { volumes: [], unreachableNodes: [], answeredNodes: ['node-a', 'node-b'] } as object,
  snapshots: { snapshots: [], unreachableNodes: [], answeredNodes: ['node-a', 'node-b'] } as object,
  pending: [] as OperationSummary[],
  transfers: { transfers: [], unreachableNodes: [], truncatedNodes: [] } as object | Error,
};
jest.mock('../../../operations/volume-operations', () => ({
  VolumeOperations: class {
    list = async () => mockTemporal.volumes;
  },
}));
jest.mock('../../../operations/snapshot-operations', () => ({
  SnapshotOperations: class {
    list = async () => mockTemporal.snapshots;
  },
}));
jest.mock('../../../operations/pending-operations', () => ({
  listPendingOperations: async () => mockTemporal.pending,
}));
jest.mock('../../../operations/move-operations', () => ({
  listPoolTransfers: async () => {
    if (mockTemporal.transfers instanceof Error) throw mockTemporal.transfers;
    return mockTemporal.transfers;
  },
}));

const DRIVER = 'durable-csi.io';
const PREFIX = '0123456789abcdef';
const key = (n: number) => n.toString(16).padStart(32, '0');
const volumeId = (nodeId: string, n: number) => formatVolumeId({ nodeId, poolIdPrefix: PREFIX, key: key(n) });
const snapshotId = (nodeId: string, n: number) => formatSnapshotId({ nodeId, poolIdPrefix: PREFIX, key: key(n) });
const STARTED = new Date('2026-01-02T03:04:05.678Z');

function operation(type: string, workflowId: string, id: string | null, nodeId: string): OperationSummary {
  return {
    workflowId,
    runId: 'run',
    type,
    operation: type,
    status: 'RUNNING',
    volumeId: id,
    volumeName: null,
    nodeId,
    phase: 'waiting-for-node',
    startTime: STARTED,
    closeTime: null,
    waitingSince: null,
  };
}
const volumeDeletion = (id: string, nodeId: string) =>
  operation('deleteVolume', deleteWorkflowId(DRIVER, id), id, nodeId);
const snapshotDeletion = (id: string, nodeId: string) =>
  operation('deleteSnapshot', deleteSnapshotWorkflowId(DRIVER, id), id, nodeId);

/** The Kubernetes API as the report reads it: these PVs (Bound), no claim being provisioned, these contents. */
function kubernetes(pvHandles: string[], contents: 'not-installed' | { name: string; handle: string }[]) {
  const core = {
    listPersistentVolume: async () => ({
      items: pvHandles.map((handle, n) => ({
        metadata: { name: `pv-${n}`, uid: `uid-${n}` },
        spec: { csi: { driver: DRIVER, volumeHandle: handle } },
        status: { phase: 'Bound' },
      })),
    }),
    listPersistentVolumeClaimForAllNamespaces: async () => ({ items: [] }),
  } as unknown as CoreV1Api;
  const custom = {
    listClusterCustomObject: async () => {
      if (contents === 'not-installed') throw Object.assign(new Error('HTTP 404'), { code: 404 });
      return {
        items: contents.map(({ name, handle }) => ({
          metadata: { name, deletionTimestamp: '2026-01-02T03:04:05Z' },
          spec: { driver: DRIVER, volumeSnapshotRef: { uid: name } },
          status: { snapshotHandle: handle },
        })),
      };
    },
  } as unknown as CustomObjectsApi;
  return { core, custom };
}

const client = {} as Client; // only asked about Released PVs, of which these tests have none

beforeEach(() => {
  // Two deletions whose object remains (a PV, a content being deleted), and one of each kind whose object is gone;
  // the deletions without their object wait for node-c, which is away. A snapshot being made is no deletion.
  mockTemporal.pending = [
    volumeDeletion(volumeId('node-a', 1), 'node-a'),
    volumeDeletion(volumeId('node-c', 2), 'node-c'),
    snapshotDeletion(snapshotId('node-a', 3), 'node-a'),
    snapshotDeletion(snapshotId('node-c', 4), 'node-c'),
    operation('createSnapshot', createSnapshotWorkflowId(DRIVER, 'snap-5'), volumeId('node-a', 1), 'node-a'),
  ];
});

describe("a running move's snapshot and copy (docs/volume-moves.md)", () => {
  it('are no orphans while the move runs, named as its VolumeName attribute says; once it is gone they are', async () => {
    const name = `move-${key(42)}`;
    mockTemporal.volumes = {
      volumes: [{ volumeId: volumeId('node-b', 9), name, nodeId: 'node-b', capacityBytes: 1 }],
      unreachableNodes: [],
      answeredNodes: ['node-a', 'node-b'],
    };
    mockTemporal.snapshots = {
      snapshots: [
        {
          snapshotId: snapshotId('node-a', 8),
          name,
          sourceVolumeId: volumeId('node-a', 1),
          nodeId: 'node-a',
          sizeBytes: 1,
          createdAt: STARTED.toISOString(),
        },
      ],
      unreachableNodes: [],
      answeredNodes: ['node-a', 'node-b'],
    };
    const apis = () => kubernetes([volumeId('node-a', 1)], []);
    const move = { ...operation('moveVolume', `${DRIVER}/move/x`, volumeId('node-a', 1), 'node-a'), volumeName: name };
    mockTemporal.pending = [move];
    expect(await buildOrphanReport(client, apis(), DRIVER)).toMatchObject({
      unclaimedVolumes: [],
      unclaimedSnapshots: [],
    });
    mockTemporal.pending = [];
    const after = await buildOrphanReport(client, apis(), DRIVER);
    expect(after.unclaimedVolumes.map((volume) => volume.name)).toEqual([name]);
    expect(after.unclaimedSnapshots.map((snapshot) => snapshot.name)).toEqual([name]);
    mockTemporal.volumes = { volumes: [], unreachableNodes: [], answeredNodes: ['node-a', 'node-b'] };
    mockTemporal.snapshots = { snapshots: [], unreachableNodes: [], answeredNodes: ['node-a', 'node-b'] };
  });
});

describe('what a move left in the pools (transfers/)', () => {
  const transfer = (nodeId: string, n: number, direction: 'in' | 'out') => ({
    nodeId,
    moveKey: key(n),
    direction,
    bytesOnDisk: 4096,
    modifiedAt: STARTED.toISOString(),
  });
  afterEach(() => {
    mockTemporal.transfers = { transfers: [], unreachableNodes: [], truncatedNodes: [] };
  });

  it("lists those of no running move (a running one's by its VolumeName `move-<key>`), and the nodes not checked", async () => {
    mockTemporal.transfers = {
      transfers: [transfer('node-b', 41, 'in'), transfer('node-a', 41, 'out'), transfer('node-b', 42, 'in')],
      unreachableNodes: ['node-c'],
      truncatedNodes: ['node-d'],
    };
    const move = { ...operation('moveVolume', `${DRIVER}/move/x`, volumeId('node-a', 1), 'node-a') };
    mockTemporal.pending = [{ ...move, volumeName: `move-${key(42)}` }];
    const report = await buildOrphanReport(client, kubernetes([volumeId('node-a', 1)], []), DRIVER);
    expect(report.strandedTransfers).toEqual([transfer('node-b', 41, 'in'), transfer('node-a', 41, 'out')]);
    expect(report.uncheckedNodes).toEqual(expect.arrayContaining(['node-c', 'node-d']));
    expect(report.transfersNotChecked).toBeUndefined();
    // A move of another type's name (a create named so) does not cover a transfer.
    mockTemporal.pending = [{ ...move, type: 'createVolume', volumeName: `move-${key(42)}` }];
    const again = await buildOrphanReport(client, kubernetes([volumeId('node-a', 1)], []), DRIVER);
    expect(again.strandedTransfers.map((t) => t.moveKey)).toEqual([key(41), key(41), key(42)]);
  });

  it('says why they were not checked when the listing fails (a controller before 0.3.0), and counts no kind for them', async () => {
    mockTemporal.transfers = new Error('workflow listTransfersPage timed out');
    const apis = kubernetes([volumeId('node-a', 1)], []);
    const report = await buildOrphanReport(client, apis, DRIVER);
    expect(report.transfersNotChecked).toBe('workflow listTransfersPage timed out');
    expect(report.strandedTransfers).toEqual([]);
    const registry = new Registry();
    const logger = { warn: jest.fn() } as unknown as Logger;
    registerOrphanMetrics(registry, { client, kubernetes: apis, driverName: DRIVER, logger });
    expect(await registry.metrics()).not.toContain('kind="stranded-transfer"');
    mockTemporal.transfers = { transfers: [transfer('node-b', 41, 'in')], unreachableNodes: [], truncatedNodes: [] };
    const counted = new Registry();
    registerOrphanMetrics(counted, { client, kubernetes: apis, driverName: DRIVER, logger });
    expect(await counted.metrics()).toContain('durable_csi_orphans{kind="stranded-transfer"} 1\n');
  });
});

describe('pending deletions whose Kubernetes object is gone', () => {
  const present = () =>
    kubernetes([volumeId('node-a', 1)], [{ name: 'snapcontent-3', handle: snapshotId('node-a', 3) }]);

  it('lists a volume deletion without its PV and a snapshot deletion without its VolumeSnapshotContent', async () => {
    const report = await buildOrphanReport(client, present(), DRIVER);
    expect(report.deletionsWithoutPv).toEqual([
      {
        workflowId: deleteWorkflowId(DRIVER, volumeId('node-c', 2)),
        volumeId: volumeId('node-c', 2),
        nodeId: 'node-c',
        startTime: STARTED,
      },
    ]);
    expect(report.snapshotDeletionsWithoutContent).toEqual([
      {
        workflowId: deleteSnapshotWorkflowId(DRIVER, snapshotId('node-c', 4)),
        snapshotId: snapshotId('node-c', 4),
        nodeId: 'node-c',
        startTime: STARTED,
      },
    ]);
    expect(report.snapshotCrdsInstalled).toBe(true);
    expect(report).toMatchObject({ unclaimedVolumes: [], lostVolumes: [], unclaimedSnapshots: [], lostSnapshots: [] });
  });

  it('without the snapshot CRDs judges no snapshot deletion: the report says snapshots were not checked', async () => {
    const report = await buildOrphanReport(client, kubernetes([volumeId('node-a', 1)], 'not-installed'), DRIVER);
    expect(report.deletionsWithoutPv.map((d) => d.volumeId)).toEqual([volumeId('node-c', 2)]);
    expect(report.snapshotCrdsInstalled).toBe(false);
    expect(report.snapshotDeletionsWithoutContent).toEqual([]);
  });

  describe('durable_csi_orphans', () => {
    const logger = { warn: jest.fn() } as unknown as Logger;
    const scrape = async (apis: ReturnType<typeof kubernetes>) => {
      const registry = new Registry();
      registerOrphanMetrics(registry, { client, kubernetes: apis, driverName: DRIVER, logger });
      return registry.metrics();
    };

    it('counts each kind, the snapshot deletions without content too, and says what each is', async () => {
      const metrics = await scrape(present());
      expect(metrics).toContain('pending snapshot deletions whose VolumeSnapshotContent is gone');
      expect(metrics).toContain('(snapshot-deletion-without-content)');
      for (const [kind, count] of [
        ['unclaimed', 0],
        ['lost', 0],
        ['deletion-without-pv', 1],
        ['unclaimed-snapshot', 0],
        ['lost-snapshot', 0],
        ['snapshot-deletion-without-content', 1],
      ] as const) {
        expect(metrics).toContain(`durable_csi_orphans{kind="${kind}"} ${count}\n`);
      }
    });

    it('has no snapshot kind without the snapshot CRDs (not checked is not zero)', async () => {
      const metrics = await scrape(kubernetes([volumeId('node-a', 1)], 'not-installed'));
      expect(metrics).toContain('durable_csi_orphans{kind="deletion-without-pv"} 1\n');
      expect(metrics).not.toMatch(/kind="(unclaimed-snapshot|lost-snapshot|snapshot-deletion-without-content)"/);
    });
  });
});
