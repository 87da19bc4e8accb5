import type { CustomObjectsApi } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import type { MovedSnapshot, SnapshotSwitchInput } from '../../activities/control-activities';
import { formatSnapshotId, movedObjectName } from '../../common/names';
import {
  CONTENT_BOUND_FINALIZER,
  DELETION_POLICY_BEFORE_MOVE,
  MOVED_FROM,
  MOVE_WORKFLOW,
  snapshotSwitcher,
} from '../../kubernetes/snapshot-switch';
import { ControlPlane } from './control-plane';
import { KubeError, type KubeRest } from './kube-rest';
import { startProcess, type Proc } from './processes';
import { CONTENTS, applySnapshotCrds, getOrGone, snapshotControllerArgs, snapshotsPath } from './snapshot-objects';
import { CONTROL_PLANE_SETS, k8sTools } from './tools';
import { eventually } from '../support/eventually';

/**
 * A snapshot's switch in Kubernetes (kubernetes/snapshot-switch.ts; docs/volume-moves.md, "How a snapshot's move
 * would go") on a real kube-apiserver with the snapshot CRDs and the real snapshot-controller (v8.7.0, built by
 * scripts/install-k8s-tools.js), binding and deleting VolumeSnapshots as in a cluster. No driver and no csi-snapshotter
 * run: the test plays csi-snapshotter's part for pre-provisioned contents, as it would after ListSnapshots found their
 * handle: every content of the test's driver whose status has no snapshotHandle gets, through the status
 * subresource, readyToUse true, its spec's snapshotHandle and a restoreSize. It does nothing else of csi-snapshotter's
 * (it never takes a finalizer off a content being deleted: the switch's retire must). The switch is called as the
 * move's activities would call it, through a CustomObjectsApi stand-in over the test's REST client (client-node is
 * ESM, which jest cannot load) that records every write that succeeded and insists on the merge patch options.
 */
jest.setTimeout(300_000);

const DRIVER = 'snapswitch.e2e.durable-csi.io';
const NAMESPACE = 'snap-switch';
const SNAPSHOT_CLASS = 'snapswitch-class';
const SNAPSHOTS = snapshotsPath(NAMESPACE);
const tools = k8sTools(CONTROL_PLANE_SETS);
const plane = new ControlPlane(tools, fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-k8s-')), []);
let api: KubeRest;
let snapshotController: Proc | undefined;
let stopPlayingSnapshotter: (() => Promise<void>) | undefined;
/** The writes the switch made that the API server accepted, in order ("patch volumesnapshotcontents/x", ...). */
const writes: string[] = [];
const MERGE_PATCH = { mergePatch: true };
/** Holds a VolumeSnapshot in its deletion for as long as the test wants. */
const TEST_FINALIZER = 'e2e.durable-csi.io/hold';

interface Meta {
  name?: string;
  uid?: string;
  resourceVersion?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}
interface Content {
  metadata: Meta;
  spec: {
    driver: string;
    deletionPolicy: string;
    source: { snapshotHandle?: string };
    volumeSnapshotRef: { namespace: string; name: string; uid?: string };
    volumeSnapshotClassName?: string;
    sourceVolumeMode?: string;
  };
  status?: { snapshotHandle?: string; readyToUse?: boolean; restoreSize?: number };
}
interface Snapshot {
  metadata: Meta;
  spec: { volumeSnapshotClassName?: string; source: { volumeSnapshotContentName?: string } };
  status?: { boundVolumeSnapshotContentName?: string; readyToUse?: boolean };
}

/** The parts of client-node's CustomObjectsApi the switch calls, over the test's REST client. */
function customObjects(): CustomObjectsApi {
  type Where = { group: string; version: string; plural: string; namespace?: string; name?: string };
  const at = ({ group, version, plural, namespace, name }: Where) =>
    `/apis/${group}/${version}${namespace ? `/namespaces/${namespace}` : ''}/${plural}${name ? `/${name}` : ''}`;
  // client-node's ApiException carries the HTTP status as `code`, which api-status.ts reads.
  const call = async <T>(request: Promise<T>): Promise<T> => {
    try {
      return await request;
    } catch (error) {
      if (error instanceof KubeError) throw Object.assign(new Error(error.message), { code: error.status });
      throw error;
    }
  };
  const write = async <T>(what: string, request: Promise<T>): Promise<T> => {
    const answer = await call(request);
    writes.push(what);
    return answer;
  };
  const named = (verb: string, where: Where & { body?: { metadata?: { name?: string } } }) =>
    `${verb} ${where.plural}/${where.name ?? where.body?.metadata?.name}`;
  const custom = {
    listClusterCustomObject: (where: Where) => call(api.get(at(where))),
    getClusterCustomObject: (where: Where) => call(api.get(at(where))),
    getNamespacedCustomObject: (where: Where) => call(api.get(at(where))),
    createClusterCustomObject: (where: Where & { body: object }) =>
      write(named('create', where), api.create(at(where), where.body)),
    createNamespacedCustomObject: (where: Where & { body: object }) =>
      write(named('create', where), api.create(at(where), where.body)),
    deleteClusterCustomObject: (where: Where & { body?: object }) =>
      write(named('delete', where), api.request('DELETE', at(where), where.body)),
    deleteNamespacedCustomObject: (where: Where & { body?: object }) =>
      write(named('delete', where), api.request('DELETE', at(where), where.body)),
    patchClusterCustomObject: (where: Where & { body: object }, options: unknown) => {
      // Without the merge patch options client-node would send the body as a JSON patch.
      if (options !== MERGE_PATCH) throw new Error(`patch of ${where.name} without the merge patch options`);
      return write(named('patch', where), api.patch(at(where), where.body));
    },
  };
  return custom as unknown as CustomObjectsApi;
}

const switcher = snapshotSwitcher({ custom: customObjects(), mergePatch: MERGE_PATCH });

function kubectl(args: string[]): string {
  return execFileSync(tools.kubectl, [`--kubeconfig=${plane.adminKubeconfig()}`, ...args], { encoding: 'utf8' });
}

/**
 * csi-snapshotter's part for pre-provisioned contents (see the file's comment), every 200 ms until stopped. Only the
 * test's driver: a content of another driver is none of its business.
 */
function playSnapshotter(): () => Promise<void> {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const list = await api.get<{ items: Content[] }>(CONTENTS);
        for (const content of list.items) {
          const handle = content.spec.source.snapshotHandle;
          if (content.spec.driver !== DRIVER || !handle || content.status?.snapshotHandle) continue;
          await api
            .patch(`${CONTENTS}/${content.metadata.name}/status`, {
              status: { snapshotHandle: handle, readyToUse: true, restoreSize: 64 * 1024 * 1024 },
            })
            .catch(() => undefined);
        }
      } catch {
        // The API server restarting or busy: the next round looks again.
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

beforeAll(async () => {
  try {
    // No garbage collector: a VolumeSnapshot owned by a VolumeGroupSnapshot that does not exist must stay.
    await plane.start(['persistentvolume-protection-controller']);
    api = plane.rest();
    applySnapshotCrds(kubectl, tools);
    snapshotController = startProcess(
      'snapshot-controller',
      tools['snapshot-controller'],
      snapshotControllerArgs(plane.adminKubeconfig()),
      { logDir: plane.logDir },
    );
  } catch (error) {
    await plane.stop();
    throw error;
  }
  await api.create('/api/v1/namespaces', { metadata: { name: NAMESPACE } });
  await api.create('/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses', {
    apiVersion: 'snapshot.storage.k8s.io/v1',
    kind: 'VolumeSnapshotClass',
    metadata: { name: SNAPSHOT_CLASS },
    driver: DRIVER,
    deletionPolicy: 'Delete',
  });
  stopPlayingSnapshotter = playSnapshotter();
}, 180_000);

afterAll(async () => {
  await stopPlayingSnapshotter?.();
  await snapshotController?.stop(5000);
  api?.close();
  await plane.stop();
  if (!process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(plane.root, { recursive: true, force: true });
});

const snapshotId = (nodeId: string) =>
  formatSnapshotId({ nodeId, poolIdPrefix: randomBytes(8).toString('hex'), key: randomBytes(16).toString('hex') });
const contentPath = (name: string) => `${CONTENTS}/${name}`;
const snapshotPath = (name: string) => `${SNAPSHOTS}/${name}`;

/**
 * A VolumeSnapshot as a user's would stand before its move: pre-provisioned from a content of the test's driver (the
 * only way without a driver; the switch reads status.snapshotHandle, as for a dynamic one), Delete, bound and ready.
 */
async function readySnapshot(
  name: string,
  options: {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: object[];
    finalizers?: string[];
  } = {},
): Promise<{ id: string; uid: string; contentName: string; contentUid: string }> {
  const id = snapshotId('node-a');
  const contentName = `${name}-content`;
  await api.create(CONTENTS, {
    apiVersion: 'snapshot.storage.k8s.io/v1',
    kind: 'VolumeSnapshotContent',
    metadata: { name: contentName },
    spec: {
      driver: DRIVER,
      deletionPolicy: 'Delete',
      source: { snapshotHandle: id },
      sourceVolumeMode: 'Filesystem',
      volumeSnapshotClassName: SNAPSHOT_CLASS,
      volumeSnapshotRef: { namespace: NAMESPACE, name },
    },
  });
  await api.create(SNAPSHOTS, {
    apiVersion: 'snapshot.storage.k8s.io/v1',
    kind: 'VolumeSnapshot',
    metadata: { name, ...options },
    spec: { volumeSnapshotClassName: SNAPSHOT_CLASS, source: { volumeSnapshotContentName: contentName } },
  });
  const snapshot = await eventually(
    `VolumeSnapshot ${name} bound and ready`,
    async () => {
      const current = await api.get<Snapshot>(snapshotPath(name));
      return current.status?.readyToUse === true && current.status.boundVolumeSnapshotContentName === contentName
        ? current
        : undefined;
    },
    60_000,
    200,
  );
  const content = await eventually(
    `VolumeSnapshotContent ${contentName} bound to its VolumeSnapshot`,
    async () => {
      const current = await api.get<Content>(contentPath(contentName));
      return current.spec.volumeSnapshotRef.uid === snapshot.metadata.uid ? current : undefined;
    },
    60_000,
    200,
  );
  return { id, uid: snapshot.metadata.uid ?? '', contentName, contentUid: content.metadata.uid ?? '' };
}

function switchInput(moved: MovedSnapshot, oldSnapshotId: string, moveKey = randomBytes(16).toString('hex')) {
  const input: SnapshotSwitchInput = {
    driverName: DRIVER,
    moveWorkflowId: `${DRIVER}/move-snapshot/${oldSnapshotId}`,
    oldSnapshotId,
    newSnapshotId: snapshotId('node-b'),
    targetNodeId: 'node-b',
    newContentName: movedObjectName(moved.content.name, moveKey),
    moved,
  };
  return input;
}

/** A finalizer taken off the object as its controller would (the list read and written at one resourceVersion). */
async function dropFinalizer(objectPath: string, finalizer: string): Promise<void> {
  await eventually(`${finalizer} off ${objectPath}`, async () => {
    const current = await api.get<{ metadata: Meta }>(objectPath);
    const { finalizers = [], resourceVersion } = current.metadata;
    if (!finalizers.includes(finalizer)) return true;
    await api.patch(objectPath, {
      metadata: { finalizers: finalizers.filter((f) => f !== finalizer), resourceVersion },
    });
    return true;
  });
}

/** What the activity's retries do: calls again while the answer is Unavailable ("still waiting for ..."). */
async function retried<T>(call: () => Promise<T>, timeoutMs = 120_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof DriverError) || error.type !== FailureType.Unavailable) throw error;
      if (Date.now() - started > timeoutMs) throw error;
    }
  }
}

/** The writes one call made. */
async function writesOf<T>(call: () => Promise<T>): Promise<{ answer: T; writes: string[] }> {
  const before = writes.length;
  const answer = await call();
  return { answer, writes: writes.slice(before) };
}

const failureOf = async (call: Promise<unknown>): Promise<{ type?: string; message: string }> =>
  call.then(
    () => ({ message: 'resolved' }),
    (error: unknown) => ({
      ...(error instanceof DriverError ? { type: error.type } : {}),
      message: error instanceof Error ? error.message : String(error),
    }),
  );

/** What the move made or marked: its new content, and its old content held (Retain, the policy kept aside). */
async function traces(input: SnapshotSwitchInput): Promise<string[]> {
  const list = await api.get<{ items: Content[] }>(CONTENTS);
  return list.items
    .filter((content) => content.spec.driver === DRIVER)
    .flatMap((content) => [
      ...(content.metadata.name === input.newContentName ? [`${content.metadata.name} exists`] : []),
      ...(content.metadata.annotations?.[MOVE_WORKFLOW] === input.moveWorkflowId
        ? [`${content.metadata.name} names the move`]
        : []),
      ...(content.metadata.name === input.moved.content.name &&
      content.metadata.annotations?.[DELETION_POLICY_BEFORE_MOVE] !== undefined
        ? [`${content.metadata.name} is held`]
        : []),
    ]);
}

describe('the snapshot switch on a real API server with the snapshot-controller', () => {
  it('moves the VolumeSnapshot, under its name, labels and annotations, to a new content naming the copy; each step again is a no-op', async () => {
    const labels = { app: 'db', tier: 'data' };
    const annotations = { 'example.com/owner': 'team-db', 'example.com/note': 'nightly' };
    const old = await readySnapshot('db-snap', { labels, annotations });

    const moved = await switcher.read(DRIVER, old.id);
    expect(moved).toEqual({
      snapshot: {
        namespace: NAMESPACE,
        name: 'db-snap',
        uid: old.uid,
        labels,
        annotations,
        volumeSnapshotClassName: SNAPSHOT_CLASS,
      },
      content: {
        name: old.contentName,
        uid: old.contentUid,
        deletionPolicy: 'Delete',
        volumeSnapshotClassName: SNAPSHOT_CLASS,
        sourceVolumeMode: 'Filesystem',
      },
    });
    expect(await writesOf(() => switcher.read(DRIVER, old.id))).toEqual({ answer: moved, writes: [] });
    const input = switchInput(moved, old.id);

    // prepare: the old content held (Retain, its policy kept aside), the new content made; again: nothing.
    expect((await writesOf(() => switcher.prepare(input))).writes).toEqual([
      `patch volumesnapshotcontents/${old.contentName}`,
      `create volumesnapshotcontents/${input.newContentName}`,
    ]);
    expect((await writesOf(() => switcher.prepare(input))).writes).toEqual([]);
    const held = await api.get<Content>(contentPath(old.contentName));
    expect(held.spec.deletionPolicy).toBe('Retain');
    expect(held.metadata.annotations?.[DELETION_POLICY_BEFORE_MOVE]).toBe('Delete');
    const fresh = await api.get<Content>(contentPath(input.newContentName));
    expect(fresh.metadata.annotations).toMatchObject({
      [MOVED_FROM]: old.id,
      [MOVE_WORKFLOW]: input.moveWorkflowId,
    });
    expect(fresh.spec).toEqual({
      driver: DRIVER,
      deletionPolicy: 'Retain',
      source: { snapshotHandle: input.newSnapshotId },
      volumeSnapshotRef: { namespace: NAMESPACE, name: 'db-snap' },
      volumeSnapshotClassName: SNAPSHOT_CLASS,
      sourceVolumeMode: 'Filesystem',
    });

    // switchSnapshot: deleted, made again, bound and ready on the new content, which takes the old policy.
    let heartbeats = 0;
    const { snapshotUid } = await retried(() => switcher.switchSnapshot(input, () => heartbeats++));
    expect(heartbeats).toBeGreaterThan(0);
    expect(snapshotUid).not.toBe(old.uid);
    const again = await writesOf(() => switcher.switchSnapshot(input, () => undefined));
    expect(again).toEqual({ answer: { snapshotUid }, writes: [] });

    const list = await api.get<{ items: Snapshot[] }>(SNAPSHOTS);
    expect(list.items.filter((s) => s.metadata.name === 'db-snap').map((s) => s.metadata.uid)).toEqual([snapshotUid]);
    const snapshot = await api.get<Snapshot>(snapshotPath('db-snap'));
    expect(snapshot.metadata.labels).toEqual(labels);
    expect(snapshot.metadata.annotations).toEqual(annotations);
    expect(snapshot.spec).toEqual({
      volumeSnapshotClassName: SNAPSHOT_CLASS,
      source: { volumeSnapshotContentName: input.newContentName },
    });
    expect(snapshot.status).toMatchObject({ boundVolumeSnapshotContentName: input.newContentName, readyToUse: true });
    const released = await api.get<Content>(contentPath(input.newContentName));
    expect(released.spec.deletionPolicy).toBe('Delete');
    expect(released.spec.volumeSnapshotRef.uid).toBe(snapshotUid);
    expect(released.status?.snapshotHandle).toBe(input.newSnapshotId);
    // The old content is still there (Retain) until retire: there is a copy the CO knows at every moment.
    const beforeRetire = await api.get<Content>(contentPath(old.contentName));
    expect(beforeRetire.spec.deletionPolicy).toBe('Retain');
    // The snapshot-controller's finalizer, which only csi-snapshotter would take off once the content is deleted.
    expect(beforeRetire.metadata.finalizers).toContain(CONTENT_BOUND_FINALIZER);

    // retire: the old content deleted, the snapshot-controller's finalizer taken off (no csi-snapshotter here).
    const retired = await writesOf(() => retried(() => switcher.retire(input, () => undefined)));
    expect(retired.writes).toEqual([
      `delete volumesnapshotcontents/${old.contentName}`,
      `patch volumesnapshotcontents/${old.contentName}`,
    ]);
    expect(await getOrGone(api, contentPath(old.contentName))).toBeUndefined();
    expect((await writesOf(() => switcher.retire(input, () => undefined))).writes).toEqual([]);

    // What is left: the VolumeSnapshot on the new content, and read names the new ID, not the old.
    await expect(failureOf(switcher.read(DRIVER, old.id))).resolves.toMatchObject({ type: FailureType.NotFound });
    const readAgain = await switcher.read(DRIVER, input.newSnapshotId);
    expect(readAgain.snapshot).toMatchObject({ uid: snapshotUid, labels, annotations });
    expect(readAgain.content).toMatchObject({ name: input.newContentName, deletionPolicy: 'Delete' });
  });

  it('a switch and a retire stopped after every step (a crash, a lost worker) go on from where they stood', async () => {
    const old = await readySnapshot('crash-snap', { labels: { app: 'crash' } });
    const moved = await switcher.read(DRIVER, old.id);
    const input = switchInput(moved, old.id);
    await switcher.prepare(input);

    // Each attempt is stopped at its second heartbeat, that is after one step: the next one must go on from there.
    const stepwise = async <T>(step: (heartbeat: () => void) => Promise<T>) => {
      const steps: string[][] = [];
      for (let attempt = 0; attempt < 200; attempt++) {
        let beats = 0;
        const stopped = new Error('stopped by the test');
        const done = await writesOf(() =>
          step(() => {
            if (++beats > 1) throw stopped;
          }).catch((error: unknown) => {
            if (error !== stopped && !(error instanceof DriverError && error.type === FailureType.Unavailable))
              throw error;
            return undefined;
          }),
        );
        if (done.writes.length) steps.push(done.writes);
        if (done.answer !== undefined) return { answer: done.answer, steps };
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error(`not done in 200 attempts: ${JSON.stringify(steps)}`);
    };
    const switched = await stepwise((heartbeat) => switcher.switchSnapshot(input, heartbeat));
    expect(switched.steps).toEqual([
      ['delete volumesnapshots/crash-snap'],
      ['create volumesnapshots/crash-snap'],
      [`patch volumesnapshotcontents/${input.newContentName}`],
    ]);
    const snapshot = await api.get<Snapshot>(snapshotPath('crash-snap'));
    expect(snapshot.metadata.uid).toBe(switched.answer.snapshotUid);
    expect(snapshot.metadata.labels).toEqual({ app: 'crash' });
    expect(snapshot.status).toMatchObject({ boundVolumeSnapshotContentName: input.newContentName, readyToUse: true });
    expect((await api.get<Content>(contentPath(input.newContentName))).spec.deletionPolicy).toBe('Delete');

    const retired = await stepwise((heartbeat) => switcher.retire(input, heartbeat).then(() => 'retired'));
    expect(retired.steps).toEqual([
      [`delete volumesnapshotcontents/${old.contentName}`],
      [`patch volumesnapshotcontents/${old.contentName}`],
    ]);
    expect(await getOrGone(api, contentPath(old.contentName))).toBeUndefined();
  });

  it('a VolumeSnapshot deleted between read and prepare: prepare refuses (FailedPrecondition) and undo leaves nothing of the move', async () => {
    // A finalizer of the test's holds it while it is being deleted: refused then, and once it is gone.
    const old = await readySnapshot('gone-snap', { finalizers: [TEST_FINALIZER] });
    const moved = await switcher.read(DRIVER, old.id);
    const input = switchInput(moved, old.id);
    await api.delete(snapshotPath('gone-snap'));
    const deleting = await api.get<Snapshot>(snapshotPath('gone-snap'));
    expect(deleting.metadata.deletionTimestamp).toBeDefined();
    for (const when of ['being deleted', 'gone']) {
      if (when === 'gone') {
        await dropFinalizer(snapshotPath('gone-snap'), TEST_FINALIZER);
        // Its content is Delete: the snapshot-controller deletes it and keeps the VolumeSnapshot until it is gone;
        // csi-snapshotter would take the content's finalizer off after DeleteSnapshot. The test does, for it.
        await eventually('VolumeSnapshotContent of gone-snap being deleted', async () =>
          Boolean((await getOrGone<Content>(api, contentPath(old.contentName)))?.metadata.deletionTimestamp),
        );
        await dropFinalizer(contentPath(old.contentName), CONTENT_BOUND_FINALIZER);
        await eventually(
          'VolumeSnapshot gone-snap gone',
          async () => !(await getOrGone(api, snapshotPath('gone-snap'))),
        );
      }
      const prepared = await writesOf(() => failureOf(switcher.prepare(input)));
      expect({ when, ...prepared }).toMatchObject({
        when,
        answer: { type: FailureType.FailedPrecondition },
        writes: [],
      });
      expect(prepared.answer.message).toMatch(/deleted or made again during the move's copy/);
    }
    const undone = await writesOf(() => switcher.undo(input));
    expect(undone.writes).toEqual([]);
    expect(await traces(input)).toEqual([]);
    expect(await getOrGone(api, contentPath(input.newContentName))).toBeUndefined();
  });

  it("undo after prepare restores the old content's policy and removes the new content", async () => {
    const old = await readySnapshot('undo-snap');
    const moved = await switcher.read(DRIVER, old.id);
    const input = switchInput(moved, old.id);
    await switcher.prepare(input);
    expect((await traces(input)).sort()).toEqual(
      [`${old.contentName} is held`, `${input.newContentName} exists`, `${input.newContentName} names the move`].sort(),
    );

    expect(await writesOf(() => switcher.undo(input))).toEqual({
      answer: undefined,
      writes: [
        `delete volumesnapshotcontents/${input.newContentName}`,
        `patch volumesnapshotcontents/${old.contentName}`,
      ],
    });
    expect(await getOrGone(api, contentPath(input.newContentName))).toBeUndefined();
    const restored = await api.get<Content>(contentPath(old.contentName));
    expect(restored.spec.deletionPolicy).toBe('Delete');
    expect(restored.metadata.annotations?.[DELETION_POLICY_BEFORE_MOVE]).toBeUndefined();
    const snapshot = await api.get<Snapshot>(snapshotPath('undo-snap'));
    expect(snapshot.metadata.uid).toBe(old.uid);
    expect(snapshot.status?.boundVolumeSnapshotContentName).toBe(old.contentName);
    expect(await traces(input)).toEqual([]);
    // Again: nothing left to undo.
    expect(await writesOf(() => switcher.undo(input))).toEqual({ answer: undefined, writes: [] });
  });

  it('undo after the VolumeSnapshot was deleted meanwhile keeps the old content Retain and says so', async () => {
    const old = await readySnapshot('dropped-snap');
    const moved = await switcher.read(DRIVER, old.id);
    const input = switchInput(moved, old.id);
    await switcher.prepare(input);
    await api.delete(snapshotPath('dropped-snap'));
    await eventually(
      'VolumeSnapshot dropped-snap gone',
      async () => !(await getOrGone(api, snapshotPath('dropped-snap'))),
    );

    const answer = await switcher.undo(input);
    expect(answer).toMatch(new RegExp(`${old.contentName} keeps deletion policy Retain \\(it was Delete\\)`));
    expect(await getOrGone(api, contentPath(input.newContentName))).toBeUndefined();
    const kept = await api.get<Content>(contentPath(old.contentName));
    expect(kept.spec.deletionPolicy).toBe('Retain');
    expect(kept.metadata.deletionTimestamp).toBeUndefined();
  });

  it('the switch stops when a VolumeSnapshot of the name bound to another content took its place', async () => {
    const old = await readySnapshot('taken-snap');
    const moved = await switcher.read(DRIVER, old.id);
    const input = switchInput(moved, old.id);
    await switcher.prepare(input);
    // Deleted and made again by someone else, from a content of their own, before the switch's second half.
    await api.delete(snapshotPath('taken-snap'));
    await eventually('VolumeSnapshot taken-snap gone', async () => !(await getOrGone(api, snapshotPath('taken-snap'))));
    const otherContent = await api.create<Content>(CONTENTS, {
      apiVersion: 'snapshot.storage.k8s.io/v1',
      kind: 'VolumeSnapshotContent',
      metadata: { name: 'taken-snap-theirs' },
      spec: {
        driver: DRIVER,
        deletionPolicy: 'Retain',
        source: { snapshotHandle: snapshotId('node-c') },
        volumeSnapshotRef: { namespace: NAMESPACE, name: 'taken-snap' },
      },
    });
    await api.create(SNAPSHOTS, {
      apiVersion: 'snapshot.storage.k8s.io/v1',
      kind: 'VolumeSnapshot',
      metadata: { name: 'taken-snap' },
      spec: { source: { volumeSnapshotContentName: otherContent.metadata.name } },
    });

    const switched = await failureOf(switcher.switchSnapshot(input, () => undefined));
    expect(switched).toMatchObject({ type: FailureType.FailedPrecondition });
    expect(switched.message).toMatch(/made again by someone else/);
    expect((await api.get<Content>(contentPath(old.contentName))).spec.deletionPolicy).toBe('Retain');
  });

  it('read refuses a member of a group snapshot (by its content, by its VolumeSnapshot), an unbound content, and an ID no content names', async () => {
    // By its content's status (as csi-snapshotter writes it for a group's member).
    const byContent = await readySnapshot('member-by-content');
    await expect(switcher.read(DRIVER, byContent.id)).resolves.toMatchObject({
      content: { name: byContent.contentName },
    });
    await api.patch(`${contentPath(byContent.contentName)}/status`, {
      status: { volumeGroupSnapshotHandle: 'g1_node-a_0123456789abcdef_00112233445566778899aabbccddeeff' },
    });
    const member = await failureOf(switcher.read(DRIVER, byContent.id));
    expect(member).toMatchObject({ type: FailureType.FailedPrecondition });
    expect(member.message).toMatch(/a group snapshot moves whole or not at all/);

    // By its VolumeSnapshot's owner (the snapshot-controller makes a group's members owned by the group).
    const owned = await readySnapshot('member-by-owner', {
      ownerReferences: [
        {
          apiVersion: 'groupsnapshot.storage.k8s.io/v1',
          kind: 'VolumeGroupSnapshot',
          name: 'a-group',
          uid: '00000000-0000-0000-0000-000000000001',
        },
      ],
    });
    const ownedFailure = await failureOf(switcher.read(DRIVER, owned.id));
    expect(ownedFailure).toMatchObject({ type: FailureType.FailedPrecondition });
    expect(ownedFailure.message).toMatch(/VolumeGroupSnapshot a-group: a group snapshot moves whole or not at all/);

    // A pre-provisioned content nobody's VolumeSnapshot took (its status filled: its handle is known).
    const unboundId = snapshotId('node-a');
    await api.create(CONTENTS, {
      apiVersion: 'snapshot.storage.k8s.io/v1',
      kind: 'VolumeSnapshotContent',
      metadata: { name: 'unbound-content' },
      spec: {
        driver: DRIVER,
        deletionPolicy: 'Delete',
        source: { snapshotHandle: unboundId },
        volumeSnapshotRef: { namespace: NAMESPACE, name: 'nobody' },
      },
    });
    await eventually(
      'unbound-content has its status',
      async () => (await api.get<Content>(contentPath('unbound-content'))).status?.readyToUse === true,
    );
    const unbound = await failureOf(switcher.read(DRIVER, unboundId));
    expect(unbound).toMatchObject({ type: FailureType.FailedPrecondition });
    expect(unbound.message).toMatch(/bound to no VolumeSnapshot/);
    // Another driver's content naming the same ID is not ours either.
    await expect(failureOf(switcher.read('another.driver.io', byContent.id))).resolves.toMatchObject({
      type: FailureType.NotFound,
    });

    const nobody = await failureOf(switcher.read(DRIVER, snapshotId('node-a')));
    expect(nobody).toMatchObject({ type: FailureType.NotFound });
    expect(nobody.message).toMatch(/no VolumeSnapshotContent names snapshot/);
  });
});
