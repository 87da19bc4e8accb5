import type { CustomObjectsApi } from '@kubernetes/client-node';
import { DriverError, FailureType } from '../common/failures';
import { statusOf } from './api-status';
import type { MovedSnapshot, SnapshotSwitchInput, SnapshotSwitcher } from '../activities/control-activities';
import { SNAPSHOT_CONTENTS } from './snapshot-contents';

/**
 * A snapshot's move in Kubernetes (docs/volume-moves.md, "How a snapshot's move would go"): the VolumeSnapshot that
 * names the old snapshot is made again, under its name, pre-provisioned from a new VolumeSnapshotContent that names
 * the copy adopted on the target node. A content's and a VolumeSnapshot's spec.source are immutable, so this is the
 * only way to point the name at the new ID. As in claim-switch.ts, each call reads the cluster as it is and does the
 * next thing, so a retry after a crash anywhere goes on from where the last one stopped, and the order keeps the same
 * promises: the old content is Retain before the VolumeSnapshot is deleted (its deletion cannot delete the only copy
 * the CO knows), the new content is Retain until the VolumeSnapshot is bound to it (a rollback deletes the copy
 * itself), and the old content goes only once the VolumeSnapshot is bound and ready on the new one.
 *
 * What external-snapshotter (v8.7.0) does that this relies on: the snapshot-controller writes no annotation on a
 * VolumeSnapshot (its annotations are the user's, all kept); on a content it writes
 * `snapshot.storage.kubernetes.io/volumesnapshot-being-deleted` when the VolumeSnapshot is deleted, and puts the
 * finalizer `snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection` on a content once it is bound
 * (volumeSnapshotRef.uid set), which csi-snapshotter takes off when the content is deleted (with a DeleteSnapshot
 * first only for a Delete policy). A VolumeSnapshot's own finalizers (`volumesnapshot-bound-protection`,
 * `volumesnapshot-as-source-protection` while a claim is being restored from it) are taken off by the
 * snapshot-controller once its content is Retain.
 */

/**
 * The controller's client for the snapshot CRDs, and client-node's request options for a JSON merge patch (its
 * custom objects' patch is a JSON patch otherwise), made by the caller (kubernetes/controller-integration.ts): this
 * module imports client-node's types only, so that jest can load it.
 */
export interface SnapshotKube {
  custom: CustomObjectsApi;
  mergePatch: unknown;
}

export function snapshotSwitcher(kube: SnapshotKube): SnapshotSwitcher {
  return {
    read: (driverName, snapshotId) => readMovedSnapshot(kube, driverName, snapshotId),
    prepare: (input) => prepareSnapshotSwitch(kube, input),
    switchSnapshot: (input, heartbeat) => switchSnapshot(kube, input, heartbeat),
    retire: (input, heartbeat) => retireOldContent(kube, input, heartbeat),
    undo: (input) => undoSnapshotSwitch(kube, input),
  };
}

/** On the old content while its policy is Retain for the move: the policy it had, restored on a rollback. */
export const DELETION_POLICY_BEFORE_MOVE = 'durable-csi.io/deletion-policy-before-move';
/** On the new content: the snapshot ID it was moved from, and the move. */
export const MOVED_FROM = 'durable-csi.io/moved-from';
export const MOVE_WORKFLOW = 'durable-csi.io/move';
/** The snapshot-controller's finalizer on a bound content, csi-snapshotter's to take off once the content goes. */
export const CONTENT_BOUND_FINALIZER = 'snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection';
/** The snapshot-controller's mark on a content that is a member of a group snapshot. */
const GROUP_HANDLE_ANNOTATION = 'groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle';

export const VOLUME_SNAPSHOTS = { group: 'snapshot.storage.k8s.io', version: 'v1', plural: 'volumesnapshots' } as const;

/** How long one call waits for the snapshot-controller (a deletion, a binding) before it says it still waits. */
const WAIT_MS = 20_000;
const POLL_MS = 500;

interface Meta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: { kind?: string; name?: string }[];
}

interface Content {
  metadata?: Meta;
  spec?: {
    driver?: string;
    deletionPolicy?: string;
    volumeSnapshotClassName?: string;
    sourceVolumeMode?: string;
    source?: { snapshotHandle?: string; volumeHandle?: string };
    volumeSnapshotRef?: { namespace?: string; name?: string; uid?: string };
  };
  status?: { snapshotHandle?: string; readyToUse?: boolean; volumeGroupSnapshotHandle?: string };
}

interface Snapshot {
  metadata?: Meta;
  spec?: {
    volumeSnapshotClassName?: string;
    source?: { persistentVolumeClaimName?: string; volumeSnapshotContentName?: string };
  };
  status?: {
    boundVolumeSnapshotContentName?: string;
    readyToUse?: boolean;
    volumeGroupSnapshotName?: string;
    error?: { message?: string };
  };
}

const handleOf = (content: Content) => content.status?.snapshotHandle || content.spec?.source?.snapshotHandle;

/**
 * The content of our driver that names the snapshot, and the VolumeSnapshot bound to it. NotFound when no content
 * names it; FailedPrecondition when it is bound to no VolumeSnapshot (one that still exists, is not being deleted
 * and is bound back), or is a member of a group snapshot. Nothing is touched before this answers.
 */
export async function readMovedSnapshot(
  kube: SnapshotKube,
  driverName: string,
  snapshotId: string,
): Promise<MovedSnapshot> {
  const contents = (await listContents(kube)).filter(
    (content) => content.spec?.driver === driverName && handleOf(content) === snapshotId,
  );
  if (contents.length === 0) {
    throw new DriverError(
      FailureType.NotFound,
      `no VolumeSnapshotContent names snapshot ${snapshotId}: in a cluster a move switches a VolumeSnapshot to the ` +
        'copy, and this snapshot has none',
    );
  }
  // Two contents may name one handle (a pre-provisioned one made by hand); only the one a VolumeSnapshot uses moves.
  const bound = contents.filter(
    (content) => content.spec?.volumeSnapshotRef?.uid && !content.metadata?.deletionTimestamp,
  );
  if (bound.length > 1) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `snapshot ${snapshotId} is named by ${bound.length} bound VolumeSnapshotContents ` +
        `(${bound.map((c) => c.metadata?.name).join(', ')}): move refused, which VolumeSnapshot would follow is unclear`,
    );
  }
  const content = bound[0] ?? contents[0]!;
  const contentName = content.metadata?.name ?? '';
  const where = `VolumeSnapshotContent ${contentName} of snapshot ${snapshotId}`;
  if (content.status?.volumeGroupSnapshotHandle || content.metadata?.annotations?.[GROUP_HANDLE_ANNOTATION]) {
    throw groupMember(`${where} is a member of group snapshot ${content.status?.volumeGroupSnapshotHandle ?? ''}`);
  }
  const ref = content.spec?.volumeSnapshotRef;
  if (!content.metadata?.uid || content.metadata.deletionTimestamp || !ref?.namespace || !ref.name || !ref.uid) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${where} is ${content.metadata?.deletionTimestamp ? 'being deleted' : 'bound to no VolumeSnapshot'}: ` +
        'only a bound snapshot is moved (its VolumeSnapshot is what follows it)',
    );
  }
  const snapshot = await readSnapshot(kube, ref.namespace, ref.name);
  if (
    snapshot?.metadata?.uid !== ref.uid ||
    snapshot.status?.boundVolumeSnapshotContentName !== contentName ||
    snapshot.metadata.deletionTimestamp
  ) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `VolumeSnapshot ${ref.namespace}/${ref.name} of ${where} is gone, being deleted or bound elsewhere: nothing ` +
        'to move it to',
    );
  }
  const group =
    snapshot.status.volumeGroupSnapshotName ??
    snapshot.metadata.ownerReferences?.find((owner) => owner.kind === 'VolumeGroupSnapshot')?.name;
  if (group !== undefined) {
    throw groupMember(`VolumeSnapshot ${ref.namespace}/${ref.name} is a member of VolumeGroupSnapshot ${group}`);
  }
  const snapshotClass = snapshot.spec?.volumeSnapshotClassName;
  const contentClass = content.spec?.volumeSnapshotClassName;
  const volumeMode = content.spec?.sourceVolumeMode;
  return {
    snapshot: {
      namespace: ref.namespace,
      name: ref.name,
      uid: ref.uid,
      labels: { ...snapshot.metadata.labels },
      annotations: { ...snapshot.metadata.annotations },
      ...(snapshotClass ? { volumeSnapshotClassName: snapshotClass } : {}),
    },
    content: {
      name: contentName,
      uid: content.metadata.uid,
      deletionPolicy: content.spec?.deletionPolicy ?? 'Delete',
      ...(contentClass ? { volumeSnapshotClassName: contentClass } : {}),
      ...(volumeMode ? { sourceVolumeMode: volumeMode } : {}),
    },
  };
}

function groupMember(what: string): DriverError {
  return new DriverError(FailureType.FailedPrecondition, `${what}: a group snapshot moves whole or not at all`);
}

/**
 * The switch's first half, before anything is deleted: the VolumeSnapshot found as it was (FailedPrecondition
 * otherwise: it was deleted or made again during the copy, and the move rolls back), the old content's policy set to
 * Retain, the new content made. A call after the switch went on (a retry) finds the VolumeSnapshot bound to the new
 * content, and answers.
 */
export async function prepareSnapshotSwitch(kube: SnapshotKube, input: SnapshotSwitchInput): Promise<void> {
  const { moved, newContentName } = input;
  const { namespace, name } = moved.snapshot;
  const snapshot = await readSnapshot(kube, namespace, name);
  if (
    snapshot?.metadata?.uid !== moved.snapshot.uid &&
    snapshot?.spec?.source?.volumeSnapshotContentName === newContentName
  )
    return;
  if (snapshot?.metadata?.uid !== moved.snapshot.uid || snapshot.metadata.deletionTimestamp) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `VolumeSnapshot ${namespace}/${name} was deleted or made again during the move's copy: nothing is switched`,
    );
  }
  await holdOldContent(kube, input);
  await ensureNewContent(kube, input);
}

/**
 * The switch's second half: the VolumeSnapshot deleted (the snapshot-controller takes its finalizers off; the old
 * content is Retain, so nothing is deleted on the node) and made again under its name from the new content. Returns
 * its UID once it is bound to the new content and ready (csi-snapshotter has found the new ID through ListSnapshots);
 * throws Unavailable (retried) while it waits, saying on what; FailedPrecondition when the name was taken by another
 * VolumeSnapshot meanwhile.
 */
export async function switchSnapshot(
  kube: SnapshotKube,
  input: SnapshotSwitchInput,
  heartbeat: () => void,
): Promise<{ snapshotUid: string }> {
  const { moved, newContentName } = input;
  const { namespace, name } = moved.snapshot;
  const where = `VolumeSnapshot ${namespace}/${name}`;
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    heartbeat();
    const snapshot = await readSnapshot(kube, namespace, name);
    const uid = snapshot?.metadata?.uid;
    if (!snapshot || !uid) {
      if (!(await readContent(kube, newContentName))) {
        throw new DriverError(
          FailureType.FailedPrecondition,
          `VolumeSnapshotContent ${newContentName} is gone (rolled back?): ${where} is not made again`,
        );
      }
      await createSnapshot(kube, input);
    } else if (uid === moved.snapshot.uid) {
      if (!snapshot.metadata?.deletionTimestamp) {
        await deleteSnapshot(kube, namespace, name, uid);
      } else if (Date.now() > deadline) {
        throw new DriverError(
          FailureType.Unavailable,
          `still waiting for ${where} to be deleted for the switch; its finalizers hold it: ` +
            `${(snapshot.metadata.finalizers ?? []).join(', ')} (the snapshot-controller takes them off, or waits ` +
            'while a claim is being restored from it)',
        );
      }
    } else if (snapshot.spec?.source?.volumeSnapshotContentName === newContentName) {
      if (snapshot.metadata?.deletionTimestamp) {
        throw new DriverError(
          FailureType.FailedPrecondition,
          `${where}, made again by the switch, is being deleted: the data stays in VolumeSnapshotContent ` +
            `${newContentName} (kept with deletion policy Retain)`,
        );
      }
      if (snapshot.status?.boundVolumeSnapshotContentName === newContentName && snapshot.status.readyToUse === true) {
        await releaseNewContent(kube, input);
        return { snapshotUid: uid };
      }
      if (Date.now() > deadline) {
        const error = snapshot.status?.error?.message;
        throw new DriverError(
          FailureType.Unavailable,
          `still waiting for ${where} to be bound to ${newContentName} and ready (the snapshot-controller binds ` +
            `them, csi-snapshotter checks the new ID through ListSnapshots)${error ? `: ${error}` : ''}`,
        );
      }
    } else {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `${where} was made again by someone else while the move switched it (bound to ` +
          `${snapshot.status?.boundVolumeSnapshotContentName ?? snapshot.spec?.source?.volumeSnapshotContentName ?? 'nothing'}); ` +
          `the data stays in VolumeSnapshotContent ${moved.content.name} (kept with deletion policy Retain)`,
      );
    }
    await sleep(POLL_MS);
  }
}

/**
 * After the switch: the old content deleted (its policy is Retain, so csi-snapshotter issues no DeleteSnapshot; the
 * move deletes the old snapshot on its node after this). The bound-protection finalizer, which only csi-snapshotter
 * would take off, is taken off here once the content is being deleted: with Retain there is nothing to delete first.
 * A content already gone, or replaced by another of its name, is done.
 */
export async function retireOldContent(
  kube: SnapshotKube,
  input: SnapshotSwitchInput,
  heartbeat: () => void,
): Promise<void> {
  const { moved } = input;
  const { content } = moved;
  const snapshot = await readSnapshot(kube, moved.snapshot.namespace, moved.snapshot.name);
  if (snapshot?.metadata?.uid === moved.snapshot.uid) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `VolumeSnapshot ${moved.snapshot.namespace}/${moved.snapshot.name} is still the one bound to ` +
        `VolumeSnapshotContent ${content.name}: not switched, so the old content stays`,
    );
  }
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    heartbeat();
    const current = await readContent(kube, content.name);
    if (!current || current.metadata?.uid !== content.uid) return;
    if (current.spec?.deletionPolicy !== 'Retain') {
      throw new DriverError(
        FailureType.Unavailable,
        `VolumeSnapshotContent ${content.name}'s deletion policy was changed from Retain during the move: deleting ` +
          'it would delete the snapshot behind the move; set it back to Retain to let the move finish',
      );
    }
    await deleteRetainedContent(kube, current, deadline);
    await sleep(POLL_MS);
  }
}

/**
 * A move that rolls back before its switch completed: the new content deleted (Retain, and never bound: nothing is
 * deleted on the node; the copy is the move's to delete), the old content's policy restored if its VolumeSnapshot is
 * still the one bound to it. Should the VolumeSnapshot be gone, the old content stays Retain (it names the only copy
 * the CO knows), and the answer says so. FailedPrecondition once the VolumeSnapshot was made again on the new
 * content: the switch happened, the move goes forward.
 */
export async function undoSnapshotSwitch(kube: SnapshotKube, input: SnapshotSwitchInput): Promise<string | undefined> {
  const { moved, newContentName } = input;
  const { namespace, name } = moved.snapshot;
  const snapshot = await readSnapshot(kube, namespace, name);
  if (
    snapshot?.status?.boundVolumeSnapshotContentName === newContentName ||
    snapshot?.spec?.source?.volumeSnapshotContentName === newContentName
  ) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `VolumeSnapshot ${namespace}/${name} is made on the moved copy's content ${newContentName}: the switch ` +
        'happened, not rolled back',
    );
  }
  const fresh = await readContent(kube, newContentName);
  if (fresh?.metadata?.uid) {
    if (handleOf(fresh) !== input.newSnapshotId) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `VolumeSnapshotContent ${newContentName} names ${handleOf(fresh)}, not the copy ${input.newSnapshotId}: ` +
          "not the move's, left alone",
      );
    }
    await deleteRetainedContent(kube, fresh, Date.now());
    // Gone, not only being deleted, before the rollback deletes the copy it names.
    if (await readContent(kube, newContentName)) {
      throw new DriverError(
        FailureType.Unavailable,
        `VolumeSnapshotContent ${newContentName} is being deleted; the rollback waits`,
      );
    }
  }
  const old = await readContent(kube, moved.content.name);
  if (!old || old.metadata?.uid !== moved.content.uid) return `VolumeSnapshotContent ${moved.content.name} is gone`;
  const before = old.metadata.annotations?.[DELETION_POLICY_BEFORE_MOVE];
  if (before === undefined) return undefined;
  if (
    snapshot?.metadata?.uid !== moved.snapshot.uid ||
    snapshot.status?.boundVolumeSnapshotContentName !== moved.content.name
  ) {
    return (
      `VolumeSnapshotContent ${moved.content.name} keeps deletion policy Retain (it was ${before}): its ` +
      `VolumeSnapshot ${namespace}/${name} is gone, and the snapshot it names holds the data`
    );
  }
  await patchContent(kube, moved.content.name, {
    metadata: { annotations: { [DELETION_POLICY_BEFORE_MOVE]: null }, resourceVersion: old.metadata.resourceVersion },
    spec: { deletionPolicy: before },
  });
  return undefined;
}

/* The steps. */

/** The old content's policy to Retain first: deleting the VolumeSnapshot must not delete the only copy yet. */
async function holdOldContent(kube: SnapshotKube, input: SnapshotSwitchInput): Promise<void> {
  const { content } = input.moved;
  const current = await readContent(kube, content.name);
  if (!current || current.metadata?.uid !== content.uid || handleOf(current) !== input.oldSnapshotId) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `VolumeSnapshotContent ${content.name} of snapshot ${input.oldSnapshotId} was deleted during the move: the ` +
        'VolumeSnapshot it was bound to no longer wants the snapshot',
    );
  }
  const policy = current.spec?.deletionPolicy ?? 'Delete';
  if (policy === 'Retain') return;
  await patchContent(kube, content.name, {
    metadata: {
      annotations: { [DELETION_POLICY_BEFORE_MOVE]: policy },
      resourceVersion: current.metadata.resourceVersion,
    },
    spec: { deletionPolicy: 'Retain' },
  });
}

/**
 * The new content, pre-provisioned: the copy's ID as its source, and a volumeSnapshotRef by namespace and name only
 * (so it binds the VolumeSnapshot made again under that name). Retain until the VolumeSnapshot is bound and ready,
 * then the old content's policy.
 */
async function ensureNewContent(kube: SnapshotKube, input: SnapshotSwitchInput): Promise<void> {
  const { snapshot, content } = input.moved;
  const body = {
    apiVersion: `${SNAPSHOT_CONTENTS.group}/${SNAPSHOT_CONTENTS.version}`,
    kind: 'VolumeSnapshotContent',
    metadata: {
      name: input.newContentName,
      annotations: { [MOVED_FROM]: input.oldSnapshotId, [MOVE_WORKFLOW]: input.moveWorkflowId },
    },
    spec: {
      driver: input.driverName,
      deletionPolicy: 'Retain',
      source: { snapshotHandle: input.newSnapshotId },
      volumeSnapshotRef: { namespace: snapshot.namespace, name: snapshot.name },
      ...(content.volumeSnapshotClassName ? { volumeSnapshotClassName: content.volumeSnapshotClassName } : {}),
      ...(content.sourceVolumeMode ? { sourceVolumeMode: content.sourceVolumeMode } : {}),
    },
  };
  try {
    await kube.custom.createClusterCustomObject({ ...SNAPSHOT_CONTENTS, body });
  } catch (error) {
    if (statusOf(error) !== 409) throw error;
    const existing = await readContent(kube, input.newContentName);
    if (!existing || handleOf(existing) !== input.newSnapshotId) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `VolumeSnapshotContent ${input.newContentName} exists and names ${existing && handleOf(existing)}, not the ` +
          `copy ${input.newSnapshotId}: delete it, or move again`,
      );
    }
  }
}

/** Once the VolumeSnapshot is bound and ready on it, the new content takes the old one's deletion policy. */
async function releaseNewContent(kube: SnapshotKube, input: SnapshotSwitchInput): Promise<void> {
  const policy = input.moved.content.deletionPolicy;
  const current = await readContent(kube, input.newContentName);
  if (!current || current.spec?.deletionPolicy === policy) return;
  await patchContent(kube, input.newContentName, { spec: { deletionPolicy: policy } });
}

/** The VolumeSnapshot made again under its name: its labels and annotations, pre-provisioned from the new content. */
async function createSnapshot(kube: SnapshotKube, input: SnapshotSwitchInput): Promise<void> {
  const { snapshot } = input.moved;
  const body = {
    apiVersion: `${VOLUME_SNAPSHOTS.group}/${VOLUME_SNAPSHOTS.version}`,
    kind: 'VolumeSnapshot',
    metadata: {
      name: snapshot.name,
      namespace: snapshot.namespace,
      labels: snapshot.labels,
      annotations: snapshot.annotations,
    },
    spec: {
      ...(snapshot.volumeSnapshotClassName ? { volumeSnapshotClassName: snapshot.volumeSnapshotClassName } : {}),
      source: { volumeSnapshotContentName: input.newContentName },
    },
  };
  await ignoring(
    409,
    kube.custom.createNamespacedCustomObject({ ...VOLUME_SNAPSHOTS, namespace: snapshot.namespace, body }),
  );
}

async function deleteSnapshot(kube: SnapshotKube, namespace: string, name: string, uid: string): Promise<void> {
  const body = { preconditions: { uid } };
  await ignoring([404, 409], kube.custom.deleteNamespacedCustomObject({ ...VOLUME_SNAPSHOTS, namespace, name, body }));
}

/**
 * One step of deleting a content whose policy is Retain: deleted (precondition: its UID) if it is not being deleted
 * yet; then the snapshot-controller's bound-protection finalizer taken off, as csi-snapshotter does for a Retain
 * content (nothing to delete first) once its VolumeSnapshot is gone; any other finalizer is waited for, and named
 * after the deadline.
 */
async function deleteRetainedContent(kube: SnapshotKube, current: Content, deadline: number): Promise<void> {
  const name = current.metadata?.name ?? '';
  const uid = current.metadata?.uid ?? '';
  if (!current.metadata?.deletionTimestamp) {
    const body = { preconditions: { uid } };
    await ignoring([404, 409], kube.custom.deleteClusterCustomObject({ ...SNAPSHOT_CONTENTS, name, body }));
    return;
  }
  const finalizers = current.metadata.finalizers ?? [];
  if (finalizers.includes(CONTENT_BOUND_FINALIZER) && current.spec?.deletionPolicy === 'Retain') {
    // A 409 (changed meanwhile) is read again by the next call.
    await ignoring(
      [404, 409],
      patchContent(kube, name, {
        metadata: {
          finalizers: finalizers.filter((finalizer) => finalizer !== CONTENT_BOUND_FINALIZER),
          resourceVersion: current.metadata.resourceVersion,
        },
      }),
    );
  } else if (Date.now() > deadline) {
    throw new DriverError(
      FailureType.Unavailable,
      `still waiting for VolumeSnapshotContent ${name} to be deleted; its finalizers hold it: ${finalizers.join(', ')}`,
    );
  }
}

/* Reads and writes that say what a missing object means. */

async function listContents(kube: SnapshotKube): Promise<Content[]> {
  try {
    return ((await kube.custom.listClusterCustomObject({ ...SNAPSHOT_CONTENTS })) as { items?: Content[] }).items ?? [];
  } catch (error) {
    // The snapshot CRDs are an add-on: a cluster without them has no content naming any snapshot.
    if (statusOf(error) === 404) return [];
    throw error;
  }
}

async function readContent(kube: SnapshotKube, name: string): Promise<Content | undefined> {
  return ignoring(404, kube.custom.getClusterCustomObject({ ...SNAPSHOT_CONTENTS, name }) as Promise<Content>);
}

async function readSnapshot(kube: SnapshotKube, namespace: string, name: string): Promise<Snapshot | undefined> {
  return ignoring(
    404,
    kube.custom.getNamespacedCustomObject({ ...VOLUME_SNAPSHOTS, namespace, name }) as Promise<Snapshot>,
  );
}

/** A JSON merge patch (a `null` removes a key; a resourceVersion in it is a precondition, 409 if it changed). */
async function patchContent(kube: SnapshotKube, name: string, body: object): Promise<void> {
  await kube.custom.patchClusterCustomObject(
    { ...SNAPSHOT_CONTENTS, name, body },
    kube.mergePatch as Parameters<CustomObjectsApi['patchClusterCustomObject']>[1],
  );
}

async function ignoring<T>(codes: number | number[], call: Promise<T>): Promise<T | undefined> {
  try {
    return await call;
  } catch (error) {
    const status = statusOf(error);
    if (status !== undefined && [codes].flat().includes(status)) return undefined;
    throw error;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
