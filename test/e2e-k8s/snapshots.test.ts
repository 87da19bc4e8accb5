import type { CoreV1EventList, V1PersistentVolume, V1PodSpec, V1StorageClass } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import { TOPOLOGY_NODE_KEY } from '../../common/names';
import { ClaimWatch, E2E_NAMESPACE } from './claims';
import { DRIVER, K8sCluster } from './k8s-cluster';
import { startProcess } from './processes';
import {
  CONTENTS,
  GROUP_CONTENTS,
  GROUP_SNAPSHOT_CLASS,
  SNAPSHOT_CLASS,
  applySnapshotCrds,
  createGroupSnapshot,
  createSnapshot as createSnapshotIn,
  getOrGone as getOrGoneIn,
  groupSnapshotsPath,
  memberSnapshots,
  readyGroupSnapshot,
  readySnapshot as readySnapshotIn,
  snapshotControllerArgs,
  snapshotsPath,
  type VolumeGroupSnapshotContent,
  type VolumeSnapshotContent,
} from './snapshot-objects';
import { eventually } from '../support/eventually';
import { runCli } from '../support/run-cli';
import { testTemporalFlags } from '../support/test-temporal';

/**
 * issue 22 item 4: VolumeSnapshots through external-snapshotter on a real control plane. The snapshot CRDs and the
 * snapshot-controller are the cluster's (what deploy/README.md lists as prerequisites: the CRDs of external-snapshotter's
 * client module and its controller, both v8.7.0, built and copied by scripts/install-k8s-tools.js); deploy/base with
 * deploy/components/snapshots is applied server-side, and the csi-snapshotter sidecar runs from the rendered
 * controller Pods like the other sidecars, as the controller's ServiceAccount (a missing RBAC rule fails here).
 * There is no kubelet: a volume's data is written and read in its directory in the node's pool (docs/storage.md).
 * issue 37 item 3: VolumeGroupSnapshots likewise, with the group snapshot CRDs and the snapshot-controller's and
 * csi-snapshotter's group snapshot gate at its default (on).
 */
jest.setTimeout(600_000);

// Node names of this file's own: the Temporal dev server is shared with the other suites, and it remembers each
// node's pool identity.
const NODES = ['snap-node-1', 'snap-node-2'];
const SOURCE_NODE = 'snap-node-2';
const DIR_CLASS = 'durable-csi-dir';
const IMMEDIATE_CLASS = 'e2e-snap-immediate';
const SNAPSHOTS = snapshotsPath(E2E_NAMESPACE);
const cluster = new K8sCluster();
let claims: ClaimWatch;

/** The cluster's part, before deploy/ is applied: the snapshot CRDs, then the snapshot-controller (as the admin). */
async function snapshotPrerequisites(c: K8sCluster): Promise<void> {
  applySnapshotCrds((args) => c.kubectl(args), c.tools);
  const args = snapshotControllerArgs(c.plane.adminKubeconfig());
  c.clusterProcs.push(startProcess('snapshot-controller', c.tools['snapshot-controller'], args, { logDir: c.logDir }));
}

beforeAll(async () => {
  try {
    await cluster.start(NODES, { components: ['snapshots'], prerequisites: snapshotPrerequisites });
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  await cluster.api.create('/api/v1/namespaces', { metadata: { name: E2E_NAMESPACE } });
  const immediate: V1StorageClass = {
    metadata: { name: IMMEDIATE_CLASS },
    provisioner: DRIVER,
    volumeBindingMode: 'Immediate',
    reclaimPolicy: 'Delete',
  };
  await cluster.api.create('/apis/storage.k8s.io/v1/storageclasses', immediate);
  claims = new ClaimWatch(cluster.api);
  await claims.start();
}, 300_000);

afterAll(async () => {
  claims?.stop();
  await cluster.stop();
});

function pvNode(pv: V1PersistentVolume): string | undefined {
  const terms = pv.spec?.nodeAffinity?.required?.nodeSelectorTerms ?? [];
  return terms[0]?.matchExpressions?.find((e) => e.key === TOPOLOGY_NODE_KEY)?.values?.[0];
}

/** The last field of a volume or snapshot ID: its key, the name of its directory in the pool. */
const keyOf = (id: string | undefined) => (id ?? '').split('_').pop() ?? '';
const volumeDir = (node: string, pv: V1PersistentVolume) =>
  path.join(cluster.poolDir(node), 'volumes', keyOf(pv.spec?.csi?.volumeHandle));
const snapshotDir = (node: string, handle: string) =>
  path.join(cluster.poolDir(node), 'snapshots', 'data', keyOf(handle));

const createSnapshot = (name: string, claim: string) => createSnapshotIn(cluster.api, E2E_NAMESPACE, name, claim);
const readySnapshot = (name: string) => readySnapshotIn(cluster.api, E2E_NAMESPACE, name);
const getOrGone = <T>(apiPath: string) => getOrGoneIn<T>(cluster.api, apiPath);

/** How many times the object got an Event with that reason (the API server folds repeats into one's count). */
async function eventCount(name: string, reason: string): Promise<number> {
  const list = await cluster.api.get<CoreV1EventList>(`/api/v1/events?fieldSelector=involvedObject.name%3D${name}`);
  return list.items.filter((event) => event.reason === reason).reduce((sum, event) => sum + (event.count ?? 1), 0);
}

describe('deploy/components/snapshots', () => {
  it('applies server-side on a cluster with the snapshot CRDs: the class, the sidecar, the driver serving snapshots', async () => {
    const snapshotClass = await cluster.api.get<{ driver: string; deletionPolicy: string }>(
      `/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses/${SNAPSHOT_CLASS}`,
    );
    expect(snapshotClass).toMatchObject({ driver: DRIVER, deletionPolicy: 'Delete' });
    const containers = cluster.deployment.spec?.template.spec?.containers ?? [];
    expect(containers.map((container) => container.name)).toEqual([
      'durable-csi',
      'csi-provisioner',
      'csi-resizer',
      'csi-snapshotter',
    ]);
    expect(containers[0]?.args).toContain('--snapshots');
    const groupClass = await cluster.api.get<{ driver: string; deletionPolicy: string }>(
      `/apis/groupsnapshot.storage.k8s.io/v1/volumegroupsnapshotclasses/${GROUP_SNAPSHOT_CLASS}`,
    );
    expect(groupClass).toMatchObject({ driver: DRIVER, deletionPolicy: 'Delete' });
    for (const pod of cluster.controllers) {
      expect(pod.procs.get('durable-csi')?.child.spawnargs).toContain('--snapshots');
      expect(pod.procs.get('csi-snapshotter')?.running()).toBe(true);
    }
  });

  it("the controller's Pod with the sidecar is still admitted where the restricted level is enforced", async () => {
    const restricted = 'e2e-snap-psa-restricted';
    await cluster.api.create('/api/v1/namespaces', {
      metadata: { name: restricted, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
    });
    const spec: V1PodSpec | undefined = cluster.deployment.spec?.template.spec;
    await expect(
      cluster.api.create(`/api/v1/namespaces/${restricted}/pods?dryRun=All`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'controller' },
        spec,
      }),
    ).resolves.toBeDefined();
  });
});

describe('VolumeSnapshots through csi-snapshotter', () => {
  let source: V1PersistentVolume;
  let content: VolumeSnapshotContent;
  let handle = '';

  it('a VolumeSnapshot of a bound PVC becomes readyToUse; its copy is on the source node, data and all', async () => {
    await claims.create('source', DIR_CLASS, '64Mi', SOURCE_NODE);
    source = await claims.bound('source');
    expect(pvNode(source)).toBe(SOURCE_NODE);
    fs.writeFileSync(path.join(volumeDir(SOURCE_NODE, source), 'data.txt'), 'before the snapshot\n');

    await createSnapshot('snap-1', 'source');
    const ready = await readySnapshot('snap-1');
    content = ready.content;
    handle = content.status?.snapshotHandle ?? '';
    expect(handle).toMatch(new RegExp(`^s1_${SOURCE_NODE}_[0-9a-f]{16}_[0-9a-f]{32}$`));
    expect(content.spec).toMatchObject({
      driver: DRIVER,
      deletionPolicy: 'Delete',
      source: { volumeHandle: source.spec?.csi?.volumeHandle },
    });
    expect(content.status?.readyToUse).toBe(true);
    expect(ready.snapshot.status?.restoreSize).toBe('64Mi');
    expect(fs.readFileSync(path.join(snapshotDir(SOURCE_NODE, handle), 'data.txt'), 'utf8')).toBe(
      'before the snapshot\n',
    );
    // Written after the snapshot: the restore below must not see it (the copy is independent), the clone must.
    fs.writeFileSync(path.join(volumeDir(SOURCE_NODE, source), 'data.txt'), 'after the snapshot\n');
  });

  it("a PVC restored from it binds on the source's node (the driver places it) and holds the snapshot's data", async () => {
    // Immediate: csi-provisioner offers every node; the driver answers with the snapshot's node.
    await claims.create('restored', IMMEDIATE_CLASS, '64Mi', undefined, {
      apiGroup: 'snapshot.storage.k8s.io',
      kind: 'VolumeSnapshot',
      name: 'snap-1',
    });
    const restored = await claims.bound('restored', 120_000);
    expect(pvNode(restored)).toBe(SOURCE_NODE);
    expect(cluster.volumesOnDisk(SOURCE_NODE)).toContain(keyOf(restored.spec?.csi?.volumeHandle));
    expect(fs.readFileSync(path.join(volumeDir(SOURCE_NODE, restored), 'data.txt'), 'utf8')).toBe(
      'before the snapshot\n',
    );
  });

  it('a clone PVC (dataSource PVC) binds on the source node and holds the data the source has now', async () => {
    await claims.create('clone', DIR_CLASS, '64Mi', SOURCE_NODE, { kind: 'PersistentVolumeClaim', name: 'source' });
    const clone = await claims.bound('clone', 120_000);
    expect(pvNode(clone)).toBe(SOURCE_NODE);
    expect(keyOf(clone.spec?.csi?.volumeHandle)).not.toBe(keyOf(source.spec?.csi?.volumeHandle));
    expect(fs.readFileSync(path.join(volumeDir(SOURCE_NODE, clone), 'data.txt'), 'utf8')).toBe('after the snapshot\n');
  });

  it('snapshots move makes the VolumeSnapshot again under its name, naming the copy on the other node; a restore binds there with its data; deleting it deletes that copy', async () => {
    await createSnapshot('snap-moved', 'source'); // of the data the source has now
    const before = await readySnapshot('snap-moved');
    const oldContent = before.content.metadata?.name ?? '';
    const oldHandle = before.content.status?.snapshotHandle ?? '';
    const target = NODES.find((node) => node !== SOURCE_NODE)!;
    // All along: every content of the driver that is not being deleted names a copy that is on its node's disk.
    const missing = new Set<string>();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const contents = await cluster.api.get<{ items: VolumeSnapshotContent[] }>(CONTENTS).catch(() => undefined);
        for (const item of contents?.items ?? []) {
          const named = item.status?.snapshotHandle ?? item.spec?.source?.snapshotHandle;
          if (item.spec?.driver !== DRIVER || !named || item.metadata?.deletionTimestamp) continue;
          const node = named.split('_')[1] ?? '';
          if (!fs.existsSync(snapshotDir(node, named))) missing.add(`${item.metadata?.name} -> ${named}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const answer = await runCli(
      [
        'snapshots',
        'move',
        oldHandle,
        '--to',
        target,
        '--output',
        'json',
        '--driver-name',
        DRIVER,
        ...testTemporalFlags(),
      ],
      { timeoutMs: 240_000 },
    );
    watching = false;
    await watch;
    expect({ code: answer.code, stderr: answer.code === 0 ? '' : answer.stderr }).toEqual({ code: 0, stderr: '' });
    const result = JSON.parse(answer.stdout) as { newSnapshotId: string; content: string };
    expect(result).toMatchObject({
      outcome: 'moved',
      snapshotId: oldHandle,
      targetNodeId: target,
      volumeSnapshot: `${E2E_NAMESPACE}/snap-moved`,
    });
    expect([...missing]).toEqual([]);
    // The VolumeSnapshot, under its name, bound and ready to a new content naming the copy, with the old policy.
    const after = await readySnapshot('snap-moved');
    expect(after.snapshot.metadata?.name).toBe('snap-moved');
    expect(after.content.metadata?.name).toBe(result.content);
    expect(after.content.status?.snapshotHandle).toBe(result.newSnapshotId);
    expect(after.content.spec?.deletionPolicy).toBe('Delete');
    expect(await getOrGone(`${CONTENTS}/${oldContent}`)).toBeUndefined();
    expect(fs.existsSync(snapshotDir(SOURCE_NODE, oldHandle))).toBe(false);
    expect(fs.readFileSync(path.join(snapshotDir(target, result.newSnapshotId), 'data.txt'), 'utf8')).toBe(
      'after the snapshot\n',
    );

    // A claim restored from it is placed on its new node, with its data.
    await claims.create('restored-moved', IMMEDIATE_CLASS, '64Mi', undefined, {
      apiGroup: 'snapshot.storage.k8s.io',
      kind: 'VolumeSnapshot',
      name: 'snap-moved',
    });
    const restored = await claims.bound('restored-moved', 120_000);
    expect(pvNode(restored)).toBe(target);
    expect(fs.readFileSync(path.join(volumeDir(target, restored), 'data.txt'), 'utf8')).toBe('after the snapshot\n');
    await claims.delete('restored-moved');
    await claims.pvGone(restored.metadata?.name ?? '');

    // Deleted, it goes from its new node: the new content deletes its copy as the old one would have.
    await cluster.api.delete(`${SNAPSHOTS}/snap-moved`);
    await eventually(
      'the moved copy deleted',
      async () => !fs.existsSync(snapshotDir(target, result.newSnapshotId)),
      120_000,
      500,
    );
    await eventually(
      `VolumeSnapshotContent ${result.content} gone`,
      async () => (await getOrGone(`${CONTENTS}/${result.content}`)) === undefined,
      120_000,
      500,
    );
  });

  it('deleting the VolumeSnapshot while its node agent is stopped keeps the content and the copy until it returns', async () => {
    const contentName = content.metadata?.name ?? '';
    const copy = snapshotDir(SOURCE_NODE, handle);
    await cluster.node(SOURCE_NODE).procs.get('durable-csi')?.stop();
    await cluster.api.delete(`${SNAPSHOTS}/snap-1`);

    // csi-snapshotter asked DeleteSnapshot and was refused (the driver answers ABORTED while the node is away), then
    // asked again after its backoff and was refused again: the deletion waits, it is not given up.
    await eventually(
      `two SnapshotDeleteError on ${contentName}`,
      async () => (await eventCount(contentName, 'SnapshotDeleteError')) >= 2,
      120_000,
      1000,
    );
    const waiting = await cluster.api.get<VolumeSnapshotContent>(`${CONTENTS}/${contentName}`);
    expect(waiting.metadata?.deletionTimestamp).toBeDefined();
    expect(waiting.status?.snapshotHandle).toBe(handle);
    expect(fs.existsSync(path.join(copy, 'data.txt'))).toBe(true);

    await cluster.startAgent(SOURCE_NODE);
    await eventually(
      `VolumeSnapshotContent ${contentName} gone`,
      async () => (await getOrGone(`${CONTENTS}/${contentName}`)) === undefined,
      120_000,
      500,
    );
    expect(fs.existsSync(copy)).toBe(false);
    expect(fs.readdirSync(path.join(cluster.poolDir(SOURCE_NODE), 'snapshots', 'records'))).toEqual([]);
    await eventually(
      'VolumeSnapshot snap-1 gone',
      async () => (await getOrGone(`${SNAPSHOTS}/snap-1`)) === undefined,
      120_000,
      500,
    );
  });

  it('the claims go with their volumes; the restored and cloned ones do not depend on the source', async () => {
    const pvs = new Map<string, V1PersistentVolume>();
    for (const name of ['source', 'restored', 'clone']) pvs.set(name, await claims.bound(name));
    await claims.delete('source');
    await claims.pvGone(pvs.get('source')?.metadata?.name ?? '');
    for (const name of ['restored', 'clone'])
      expect(fs.existsSync(path.join(volumeDir(SOURCE_NODE, pvs.get(name) as V1PersistentVolume), 'data.txt'))).toBe(
        true,
      );
    for (const name of ['restored', 'clone']) await claims.delete(name);
    for (const name of ['restored', 'clone']) await claims.pvGone(pvs.get(name)?.metadata?.name ?? '');
    for (const node of NODES) expect(cluster.volumesOnDisk(node)).toEqual([]);
  });
});

describe('VolumeGroupSnapshots through csi-snapshotter and the snapshot-controller (issue 37 item 3)', () => {
  const MEMBERS = ['db-1', 'db-2', 'db-3'];
  const LABELS = { 'e2e.durable-csi.io/group': 'db' };
  const GROUPS = groupSnapshotsPath(E2E_NAMESPACE);
  const sources = new Map<string, V1PersistentVolume>();
  let content: VolumeGroupSnapshotContent;
  /** Each member's snapshot handle, by the source claim's name. */
  const handles = new Map<string, string>();

  it('a VolumeGroupSnapshot of three labeled PVCs on one node becomes ready, with a VolumeSnapshot per member', async () => {
    for (const name of MEMBERS) {
      await claims.create(name, DIR_CLASS, '64Mi', SOURCE_NODE);
      await cluster.api.patch(`/api/v1/namespaces/${E2E_NAMESPACE}/persistentvolumeclaims/${name}`, {
        metadata: { labels: LABELS },
      });
    }
    // A claim of the same node without the label: the selector leaves it out.
    await claims.create('db-other', DIR_CLASS, '64Mi', SOURCE_NODE);
    for (const name of [...MEMBERS, 'db-other']) {
      const pv = await claims.bound(name);
      sources.set(name, pv);
      fs.writeFileSync(path.join(volumeDir(SOURCE_NODE, pv), 'data.txt'), `${name} before the group\n`);
    }

    const started = Date.now();
    await createGroupSnapshot(cluster.api, E2E_NAMESPACE, 'group-1', LABELS);
    const ready = await readyGroupSnapshot(cluster.api, E2E_NAMESPACE, 'group-1');
    console.log(`VolumeGroupSnapshot of ${MEMBERS.length} dir volumes readyToUse in ${Date.now() - started} ms`);
    content = ready.content;
    expect(content.spec).toMatchObject({ driver: DRIVER, deletionPolicy: 'Delete' });
    expect(content.status?.volumeGroupSnapshotHandle).toMatch(
      new RegExp(`^g1_${SOURCE_NODE}_[0-9a-f]{16}_[0-9a-f]{32}$`),
    );
    const byVolume = new Map((content.status?.volumeSnapshotInfoList ?? []).map((i) => [i.volumeHandle, i]));
    expect([...byVolume.keys()].sort()).toEqual(
      MEMBERS.map((name) => sources.get(name)?.spec?.csi?.volumeHandle).sort(),
    );
    for (const name of MEMBERS) {
      const handle = byVolume.get(sources.get(name)?.spec?.csi?.volumeHandle ?? '')?.snapshotHandle ?? '';
      expect(handle).toMatch(new RegExp(`^s1_${SOURCE_NODE}_[0-9a-f]{16}_[0-9a-f]{32}$`));
      handles.set(name, handle);
      // The member's copy, in the source node's pool, holds its own volume's data.
      expect(fs.readFileSync(path.join(snapshotDir(SOURCE_NODE, handle), 'data.txt'), 'utf8')).toBe(
        `${name} before the group\n`,
      );
    }
    // A member does not move alone: refused before anything starts, its copy where it was.
    const member = handles.get(MEMBERS[0]!)!;
    const target = NODES.find((node) => node !== SOURCE_NODE)!;
    const refused = await runCli(
      ['snapshots', 'move', member, '--to', target, '--driver-name', DRIVER, ...testTemporalFlags()],
      { timeoutMs: 120_000 },
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /FailedPrecondition: snapshot \S+ is a member of group snapshot g1_\S+: a group snapshot moves whole or not/,
    );
    expect(fs.existsSync(path.join(snapshotDir(SOURCE_NODE, member), 'data.txt'))).toBe(true);

    // One ready VolumeSnapshot per member, each bound to a content with the member's handle.
    const members = await eventually(
      'three member VolumeSnapshots readyToUse',
      async () => {
        const found = await memberSnapshots(cluster.api, E2E_NAMESPACE, 'group-1');
        return found.length === MEMBERS.length && found.every((m) => m.status?.readyToUse === true) && found;
      },
      60_000,
      250,
    );
    const memberHandles = await Promise.all(
      members.map(async (member) => {
        const memberContent = await cluster.api.get<VolumeSnapshotContent>(
          `${CONTENTS}/${member.status?.boundVolumeSnapshotContentName ?? ''}`,
        );
        return memberContent.status?.snapshotHandle;
      }),
    );
    expect(memberHandles.sort()).toEqual([...handles.values()].sort());
    for (const name of MEMBERS)
      fs.writeFileSync(
        path.join(volumeDir(SOURCE_NODE, sources.get(name) as V1PersistentVolume), 'data.txt'),
        'after\n',
      );
  });

  it("a PVC restored from a member's VolumeSnapshot binds on the node with that member's data", async () => {
    const members = await memberSnapshots(cluster.api, E2E_NAMESPACE, 'group-1');
    let member = '';
    for (const candidate of members) {
      const memberContent = await cluster.api.get<VolumeSnapshotContent>(
        `${CONTENTS}/${candidate.status?.boundVolumeSnapshotContentName ?? ''}`,
      );
      if (memberContent.status?.snapshotHandle === handles.get('db-2')) member = candidate.metadata?.name ?? '';
    }
    expect(member).not.toBe('');
    await claims.create('db-2-restored', IMMEDIATE_CLASS, '64Mi', undefined, {
      apiGroup: 'snapshot.storage.k8s.io',
      kind: 'VolumeSnapshot',
      name: member,
    });
    const restored = await claims.bound('db-2-restored', 120_000);
    sources.set('db-2-restored', restored);
    expect(pvNode(restored)).toBe(SOURCE_NODE);
    expect(fs.readFileSync(path.join(volumeDir(SOURCE_NODE, restored), 'data.txt'), 'utf8')).toBe(
      'db-2 before the group\n',
    );
  });

  it('deleting it while its node agent is stopped keeps its content and the copies; then all of it goes', async () => {
    const contentName = content.metadata?.name ?? '';
    const copies = [...handles.values()].map((handle) => snapshotDir(SOURCE_NODE, handle));
    const members = await memberSnapshots(cluster.api, E2E_NAMESPACE, 'group-1');
    const memberContents = members.map((m) => m.status?.boundVolumeSnapshotContentName ?? '');
    await cluster.node(SOURCE_NODE).procs.get('durable-csi')?.stop();
    await cluster.api.delete(`${GROUPS}/group-1`);

    // csi-snapshotter asked DeleteVolumeGroupSnapshot and was refused (ABORTED while the node is away), then asked
    // again after its backoff and was refused again: the deletion waits, it is not given up.
    await eventually(
      `two GroupSnapshotDeleteError on ${contentName}`,
      async () => (await eventCount(contentName, 'GroupSnapshotDeleteError')) >= 2,
      120_000,
      500,
    );
    const waiting = await cluster.api.get<VolumeGroupSnapshotContent>(`${GROUP_CONTENTS}/${contentName}`);
    expect(waiting.metadata?.deletionTimestamp).toBeDefined();
    expect(waiting.status?.volumeGroupSnapshotHandle).toBe(content.status?.volumeGroupSnapshotHandle);
    for (const copy of copies) expect(fs.existsSync(path.join(copy, 'data.txt'))).toBe(true);

    const returned = Date.now();
    await cluster.startAgent(SOURCE_NODE);
    await eventually(
      `VolumeGroupSnapshotContent ${contentName} gone`,
      async () => (await getOrGone(`${GROUP_CONTENTS}/${contentName}`)) === undefined,
      120_000,
      250,
    );
    console.log(`VolumeGroupSnapshotContent gone ${Date.now() - returned} ms after the node agent returned`);
    for (const copy of copies) expect(fs.existsSync(copy)).toBe(false);
    expect(fs.readdirSync(path.join(cluster.poolDir(SOURCE_NODE), 'snapshots', 'records'))).toEqual([]);
    await eventually(
      'the VolumeGroupSnapshot, its member VolumeSnapshots and their contents gone',
      async () => {
        const left = await Promise.all([
          getOrGone(`${GROUPS}/group-1`),
          ...members.map((m) => getOrGone(`${SNAPSHOTS}/${m.metadata?.name ?? ''}`)),
          ...memberContents.map((name) => getOrGone(`${CONTENTS}/${name}`)),
        ]);
        return left.every((object) => object === undefined);
      },
      120_000,
      250,
    );
  });

  it('the claims go with their volumes; the restored one did not depend on the group', async () => {
    const restored = sources.get('db-2-restored') as V1PersistentVolume;
    expect(fs.readFileSync(path.join(volumeDir(SOURCE_NODE, restored), 'data.txt'), 'utf8')).toBe(
      'db-2 before the group\n',
    );
    for (const name of sources.keys()) await claims.delete(name);
    for (const pv of sources.values()) await claims.pvGone(pv.metadata?.name ?? '');
    for (const node of NODES) expect(cluster.volumesOnDisk(node)).toEqual([]);
  });
});
