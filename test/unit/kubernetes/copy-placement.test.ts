import type { CoreV1Api, CustomObjectsApi, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { formatSnapshotId, formatVolumeId } from '../../../common/names';
import { createLogger } from '../../../common/logger';
import { CopyPlacement, SELECTED_NODE, copySourceOf } from '../../../kubernetes/copy-placement';

const DRIVER = 'durable-csi.io';
const PREFIX = '0123456789abcdef';
const key = (n: number) => n.toString(16).padStart(32, '0');
const volumeId = (nodeId: string) => formatVolumeId({ nodeId, poolIdPrefix: PREFIX, key: key(1) });
const snapshotId = (nodeId: string) => formatSnapshotId({ nodeId, poolIdPrefix: PREFIX, key: key(2) });

function claim(name: string, fields: Partial<V1PersistentVolumeClaim['spec']> = {}, extra: object = {}) {
  return {
    metadata: { name, namespace: 'app', resourceVersion: '7', ...extra },
    spec: { storageClassName: 'durable-csi-dir', ...fields },
    status: { phase: 'Pending' },
  } as V1PersistentVolumeClaim;
}
const restore = (name: string, extra: object = {}) =>
  claim(name, { dataSource: { apiGroup: 'snapshot.storage.k8s.io', kind: 'VolumeSnapshot', name: 'snap' } }, extra);
const clone = (name: string, extra: object = {}) =>
  claim(name, { dataSource: { kind: 'PersistentVolumeClaim', name: 'source' } }, extra);

/** The API as the code sees it: the source claim bound to `pv`, the PVs, the snapshot contents. */
function world(options: { pvDriver?: string; contents?: object[]; selectFails?: number } = {}) {
  const selected: [string, string][] = [];
  const core = {
    readPersistentVolume: async ({ name }: { name: string }) => {
      if (name !== 'pv-source') throw Object.assign(new Error('HTTP 404'), { code: 404 });
      return { spec: { csi: { driver: options.pvDriver ?? DRIVER, volumeHandle: volumeId('node-b') } } };
    },
  } as unknown as CoreV1Api;
  const custom = {
    listClusterCustomObject: async () => ({
      items: options.contents ?? [
        {
          metadata: { name: 'snapcontent-1' },
          spec: { driver: DRIVER, volumeSnapshotRef: { namespace: 'app', name: 'snap', uid: 'u-1' } },
          status: { snapshotHandle: snapshotId('node-c') },
        },
      ],
    }),
  } as unknown as CustomObjectsApi;
  const placement = new CopyPlacement({
    core,
    custom,
    driverName: DRIVER,
    logger: createLogger('test', 'silent'),
    claim: (namespace, name) =>
      namespace === 'app' && name === 'source' ? claim('source', { volumeName: 'pv-source' }) : undefined,
    select: async (target, node) => {
      if (options.selectFails)
        throw Object.assign(new Error(`HTTP ${options.selectFails}`), { code: options.selectFails });
      selected.push([target.metadata?.name ?? '', node]);
    },
  });
  return { placement, selected };
}

describe("a restore's or clone's claim gets its source's node", () => {
  it('a clone: the node of the source claim’s volume; a restore: the node of the snapshot’s copy', async () => {
    const { placement, selected } = world();
    await placement.seen(clone('cloned'));
    await placement.seen(restore('restored'));
    expect(selected).toEqual([
      ['cloned', 'node-b'],
      ['restored', 'node-c'],
    ]);
  });

  it('leaves every other claim alone: no data source, a node already selected, bound, being deleted, not pending', async () => {
    const { placement, selected } = world();
    await placement.seen(claim('plain'));
    await placement.seen(clone('chosen', { annotations: { [SELECTED_NODE]: 'node-a' } }));
    await placement.seen(
      claim('bound', { volumeName: 'pv-x', dataSource: { kind: 'PersistentVolumeClaim', name: 'source' } }),
    );
    await placement.seen(restore('going', { deletionTimestamp: new Date() }));
    await placement.seen({ ...clone('lost'), status: { phase: 'Lost' } });
    await placement.seen(claim('populated', { dataSourceRef: { apiGroup: 'example.io', kind: 'Thing', name: 'x' } }));
    expect(selected).toEqual([]);
  });

  it("leaves a source that is not this driver's, or not there yet, to the scheduler", async () => {
    const other = world({ pvDriver: 'ebs.csi.aws.com', contents: [] });
    await other.placement.seen(clone('cloned'));
    await other.placement.seen(restore('restored'));
    // A snapshot still being taken (no handle), and one being deleted.
    const notYet = world({
      contents: [
        { metadata: { name: 'c1' }, spec: { driver: DRIVER, volumeSnapshotRef: { namespace: 'app', name: 'snap' } } },
        {
          metadata: { name: 'c2', deletionTimestamp: '2026-01-01T00:00:00Z' },
          spec: { driver: DRIVER, volumeSnapshotRef: { namespace: 'app', name: 'snap' } },
          status: { snapshotHandle: snapshotId('node-c') },
        },
      ],
    });
    await notYet.placement.seen(restore('restored'));
    const unbound = world();
    await unbound.placement.seen(claim('c', { dataSource: { kind: 'PersistentVolumeClaim', name: 'unknown' } }));
    expect([...other.selected, ...notYet.selected, ...unbound.selected]).toEqual([]);
  });

  it('a claim changed meanwhile (409: the scheduler chose, another replica selected) is not an error; others are', async () => {
    await expect(world({ selectFails: 409 }).placement.seen(clone('cloned'))).resolves.toBeUndefined();
    await expect(world({ selectFails: 403 }).placement.seen(clone('cloned'))).rejects.toThrow('HTTP 403');
  });

  it('dataSourceRef is read like dataSource, with its namespace when it names one', () => {
    const ref = claim('r', {
      dataSourceRef: { apiGroup: 'snapshot.storage.k8s.io', kind: 'VolumeSnapshot', name: 'snap', namespace: 'other' },
    });
    expect(copySourceOf(ref)).toEqual({ kind: 'snapshot', namespace: 'other', name: 'snap' });
    expect(copySourceOf(clone('c'))).toEqual({ kind: 'claim', namespace: 'app', name: 'source' });
  });
});
