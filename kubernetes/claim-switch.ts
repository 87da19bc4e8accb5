import type {
  CoreV1Api,
  StorageV1Api,
  V1ObjectMeta,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
} from '@kubernetes/client-node';
import type { ClaimSwitcher, MovedClaim, SwitchInput } from '../activities/control-activities';
import { DriverError, FailureType } from '../common/failures';
import { TOPOLOGY_NODE_KEY, parseVolumeId } from '../common/names';
import { parseQuantity } from '../common/quantity';
import { statusOf } from './api-status';

/**
 * A move's switch in Kubernetes (issue 39, docs/volume-moves.md "The switch"): the claim that uses the moved volume
 * is bound, under the same name, to a new PV that names the copy on the target node, and the old PV goes only after
 * that. Each call reads the cluster as it is and does the next thing, so a retry after a crash anywhere (the
 * controller's, the API server's) goes on from where the last one stopped. The order keeps two promises: at no moment
 * is there no copy (the old volume is deleted by the move only after the claim is bound to the new PV), and at no
 * moment does the cluster hold a PV whose volume is gone (the old PV is deleted before the old volume, the new PV is
 * made after the new volume).
 */

/**
 * The controller's Kubernetes client for the switch, and client-node's request options for a JSON merge patch, made
 * by the caller (kubernetes/controller-integration.ts): this module imports client-node's types only, so that jest
 * can load it.
 */
export interface ClaimKube {
  core: CoreV1Api;
  mergePatch: unknown;
}

/** What the control activities call for a move's switch (activities/control-activities.ts ClaimSwitcher). */
export function claimSwitcher(kube: ClaimKube): ClaimSwitcher {
  return {
    read: (driverName, volumeId) => readMovedClaim(kube, driverName, volumeId),
    prepare: (input) => prepareSwitch(kube, input),
    switchClaim: (input, heartbeat) => switchClaim(kube, input, heartbeat),
    retire: (input, heartbeat) => retireOldPv(kube, input, heartbeat),
    undo: (input) => undoSwitch(kube, input),
  };
}

/** On the old PV while its reclaim policy is Retain for the move: the policy it had, restored on a rollback. */
export const RECLAIM_POLICY_BEFORE_MOVE = 'durable-csi.io/reclaim-policy-before-move';
/** On the new PV: the volume ID it was moved from, and the move. */
export const MOVED_FROM = 'durable-csi.io/moved-from';
export const MOVE_WORKFLOW = 'durable-csi.io/move';
/** external-provisioner's: which driver deletes the PV's volume when its reclaim policy is Delete. */
const PROVISIONED_BY = 'pv.kubernetes.io/provisioned-by';
/** external-provisioner's finalizer, which it leaves on a PV whose policy became Retain until it sees it deleted. */
const PROVISIONER_FINALIZER = 'external-provisioner.volume.kubernetes.io/finalizer';
/**
 * What the PV controller and the scheduler write on a claim while binding it: not copied to the new claim, which is
 * bound by its volumeName (a selected node would name the old one).
 */
const BINDING_ANNOTATIONS = new Set([
  'pv.kubernetes.io/bind-completed',
  'pv.kubernetes.io/bound-by-controller',
  'volume.beta.kubernetes.io/storage-provisioner',
  'volume.kubernetes.io/storage-provisioner',
  'volume.kubernetes.io/selected-node',
]);
/** How long one call waits for the API server's controllers (a deletion, a binding) before it says it still waits. */
const WAIT_MS = 20_000;
const POLL_MS = 500;

/**
 * The PV that names the volume and the claim bound to it. NotFound when no PV names it, FailedPrecondition when its
 * PV is bound to no claim: a move in a cluster moves a claim's data, and nothing is touched before this answers.
 */
export async function readMovedClaim({ core }: ClaimKube, driverName: string, volumeId: string): Promise<MovedClaim> {
  const pvs = (await core.listPersistentVolume()).items.filter(
    (pv) => pv.spec?.csi?.driver === driverName && pv.spec.csi.volumeHandle === volumeId,
  );
  const pv = pvs[0];
  if (!pv?.metadata?.name || !pv.metadata.uid || !pv.spec) {
    throw new DriverError(
      FailureType.NotFound,
      `no PersistentVolume names volume ${volumeId}: in a cluster a move switches a claim to the copy, and this ` +
        'volume has none (move it by its claim, --pvc NAMESPACE/NAME, once it is bound)',
    );
  }
  const ref = pv.spec.claimRef;
  if (pv.status?.phase !== 'Bound' || !ref?.namespace || !ref.name || !ref.uid) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `PersistentVolume ${pv.metadata.name} of volume ${volumeId} is ${pv.status?.phase ?? 'in no phase'}, bound to ` +
        'no claim: only a bound volume is moved (its claim is what follows it)',
    );
  }
  const claim = await readClaim(core, ref.namespace, ref.name);
  if (claim?.metadata?.uid !== ref.uid || claim.spec?.volumeName !== pv.metadata.name) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `claim ${ref.namespace}/${ref.name} of PersistentVolume ${pv.metadata.name} is gone or bound elsewhere: ` +
        'nothing to move it to',
    );
  }
  const { volumeName: _old, ...spec } = claim.spec;
  return {
    pv: {
      name: pv.metadata.name,
      uid: pv.metadata.uid,
      reclaimPolicy: pv.spec.persistentVolumeReclaimPolicy ?? 'Delete',
      labels: { ...pv.metadata.labels },
      spec: pv.spec,
    },
    claim: {
      namespace: ref.namespace,
      name: ref.name,
      uid: ref.uid,
      labels: { ...claim.metadata.labels },
      annotations: Object.fromEntries(
        Object.entries(claim.metadata.annotations ?? {}).filter(([key]) => !BINDING_ANNOTATIONS.has(key)),
      ),
      // A Pod owning a claim (a StatefulSet's retention policy, on scale-down) would take the new one with it.
      ownerReferences: (claim.metadata.ownerReferences ?? []).filter((owner) => owner.kind !== 'Pod'),
      spec,
    },
  };
}

/** `volumes move --pvc`: the volume ID of the PV the claim is bound to; refused with what is wrong otherwise. */
export async function claimVolumeId(
  { core }: ClaimKube,
  driverName: string,
  claim: { namespace: string; name: string },
): Promise<string> {
  const where = `claim ${claim.namespace}/${claim.name}`;
  const found = await readClaim(core, claim.namespace, claim.name);
  if (!found) throw new DriverError(FailureType.NotFound, `${where} does not exist`);
  const pvName = found.spec?.volumeName;
  const pv = pvName ? await readPv(core, pvName) : undefined;
  if (!pvName || !pv || found.status?.phase !== 'Bound')
    throw new DriverError(FailureType.FailedPrecondition, `${where} is not bound to a volume (${found.status?.phase})`);
  if (pv.spec?.csi?.driver !== driverName || !pv.spec.csi.volumeHandle) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `${where} is bound to PersistentVolume ${pvName} of ${pv.spec?.csi?.driver ?? 'no CSI driver'}, not ${driverName}`,
    );
  }
  return pv.spec.csi.volumeHandle;
}

/** A claim's volume on a node being evacuated, and where its StorageClass lets it go (undefined: anywhere). */
export interface EvacuatedClaim {
  volumeId: string;
  claim: string;
  capacityBytes: number;
  allowedNodes?: string[];
}

/**
 * `nodes evacuate`: the node must be cordoned (its Pods would otherwise start there again and hold their volumes), and
 * what it holds for claims is every bound PV of the driver whose volume ID names it, with the nodes its StorageClass's
 * allowedTopologies admit. Also the nodes that are cordoned: no target among them.
 */
export async function evacuationClaims(
  { core, storage }: ClaimKube & { storage: StorageV1Api },
  driverName: string,
  nodeId: string,
): Promise<{ claims: EvacuatedClaim[]; unschedulable: string[] }> {
  const node = await ignoring(404, core.readNode({ name: nodeId }));
  if (node && !node.spec?.unschedulable) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `node ${nodeId} is not cordoned: its Pods would start there again and hold their volumes; cordon it first ` +
        `(kubectl cordon ${nodeId}), and drain it (kubectl drain ${nodeId} --ignore-daemonsets)`,
    );
  }
  const [pvs, classes, nodes] = await Promise.all([
    core.listPersistentVolume(),
    storage.listStorageClass(),
    core.listNode(),
  ]);
  const allowed = new Map(
    classes.items.map((storageClass) => {
      const terms = storageClass.allowedTopologies ?? [];
      const values = terms.flatMap((term) =>
        (term.matchLabelExpressions ?? []).filter((e) => e.key === TOPOLOGY_NODE_KEY).flatMap((e) => e.values),
      );
      return [storageClass.metadata?.name ?? '', terms.length ? values : undefined] as const;
    }),
  );
  const claims = pvs.items.flatMap((pv) => {
    const handle = pv.spec?.csi?.driver === driverName ? pv.spec.csi.volumeHandle : undefined;
    const ref = pv.spec?.claimRef;
    if (!handle || parseVolumeId(handle)?.nodeId !== nodeId || pv.status?.phase !== 'Bound' || !ref) return [];
    const allowedNodes = allowed.get(pv.spec?.storageClassName ?? '');
    return [
      {
        volumeId: handle,
        claim: `${ref.namespace}/${ref.name}`,
        capacityBytes: parseQuantity(String(pv.spec?.capacity?.storage ?? '0')),
        ...(allowedNodes ? { allowedNodes } : {}),
      },
    ];
  });
  const unschedulable = nodes.items.filter((n) => n.spec?.unschedulable).map((n) => n.metadata?.name ?? '');
  return { claims, unschedulable };
}

/**
 * The switch's first half, before anything is deleted: the old PV's policy set to Retain (deleting its claim must not
 * delete the only copy yet), the new PV made, and the claim found as it was. FailedPrecondition (the move rolls back)
 * when the claim was deleted or rebound during the copy: nobody wants its data moved any more. A call after the
 * switch went on (a retry) finds the claim bound to the new PV, and answers.
 */
export async function prepareSwitch(kube: ClaimKube, input: SwitchInput): Promise<void> {
  const { moved, newPvName } = input;
  const where = `claim ${moved.claim.namespace}/${moved.claim.name}`;
  const claim = await readClaim(kube.core, moved.claim.namespace, moved.claim.name);
  if (claim?.spec?.volumeName === newPvName) return;
  if (claim?.metadata?.uid !== moved.claim.uid || claim.metadata.deletionTimestamp) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${where} was deleted or made again during the move's copy: nothing is switched`,
    );
  }
  await holdOldPv(kube, input);
  await ensureNewPv(kube.core, input);
}

/**
 * The switch's second half: the claim deleted (once no Pod on a node uses it) and made again under its name, bound
 * to the new PV. Returns the new claim's UID once it is bound; throws Unavailable (retried) while it waits on the
 * cluster, saying on what; FailedPrecondition when the name was taken by another bound claim meanwhile.
 */
export async function switchClaim(
  kube: ClaimKube,
  input: SwitchInput,
  heartbeat: () => void,
): Promise<{ claimUid: string; podsReset: string[] }> {
  const { core } = kube;
  const { moved, newPvName } = input;
  const { namespace, name } = moved.claim;
  const where = `claim ${namespace}/${name}`;
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    heartbeat();
    const claim = await readClaim(core, namespace, name);
    const uid = claim?.metadata?.uid;
    if (!claim || !uid) {
      await createClaim(core, input);
    } else if (uid === moved.claim.uid) {
      if (!claim.metadata?.deletionTimestamp) {
        const user = await podUsing(core, namespace, name);
        if (user) {
          throw new DriverError(
            FailureType.Unavailable,
            `${where} is used by Pod ${namespace}/${user.pod} on node ${user.node}; the move switches it once that ` +
              `Pod is gone (cordon ${user.node}, then delete the Pod or scale its workload down)`,
          );
        }
        await deleteClaim(core, namespace, name, uid);
      } else if (Date.now() > deadline) {
        throw new DriverError(
          FailureType.Unavailable,
          `${where} is being deleted for the switch; its finalizers hold it: ${(claim.metadata.finalizers ?? []).join(', ')}`,
        );
      }
    } else if (claim.spec?.volumeName === newPvName) {
      if (claim.status?.phase === 'Bound') {
        await releaseNewPv(kube, input);
        return { claimUid: uid, podsReset: await resetStrandedPods(core, input) };
      }
      if (Date.now() > deadline)
        throw new DriverError(FailureType.Unavailable, `${where} is not bound to ${newPvName} yet (the PV controller)`);
    } else if (!claim.spec?.volumeName && claim.status?.phase === 'Pending') {
      // Made from a StatefulSet's template in the moment the claim was away: unbound, it holds nothing yet.
      await deleteClaim(core, namespace, name, uid);
    } else {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `${where} was made again by someone else while the move switched it (bound to ${claim.spec?.volumeName}); ` +
          `the data stays in PersistentVolume ${moved.pv.name} (kept with reclaim policy Retain)`,
      );
    }
    await sleep(POLL_MS);
  }
}

/**
 * After the switch: the old PV deleted (its policy is Retain, so nothing else deletes the volume it names). Then
 * the move deletes the old volume on its node. A PV already gone, or replaced by another of its name, is done.
 */
export async function retireOldPv(
  kube: ClaimKube,
  input: SwitchInput,
  heartbeat: () => void,
): Promise<{ podsReset: string[] }> {
  const { core } = kube;
  const { pv } = input.moved;
  const deadline = Date.now() + WAIT_MS;
  // Again here: the scheduler may bind a Pod it placed through the template's claim just after the switch looked.
  const podsReset = await resetStrandedPods(core, input);
  for (;;) {
    heartbeat();
    const current = await readPv(core, pv.name);
    if (!current || current.metadata?.uid !== pv.uid) return { podsReset };
    if (current.spec?.persistentVolumeReclaimPolicy !== 'Retain') {
      throw new DriverError(
        FailureType.Unavailable,
        `PersistentVolume ${pv.name}'s reclaim policy was changed from Retain during the move: deleting it would ` +
          'delete the volume behind the move; set it back to Retain to let the move finish',
      );
    }
    if (!current.metadata.deletionTimestamp) {
      await ignoring(404, core.deletePersistentVolume({ name: pv.name, body: { preconditions: { uid: pv.uid } } }));
    } else if (current.metadata.finalizers?.includes(PROVISIONER_FINALIZER)) {
      // Retain: the provisioner has nothing to delete, and would only take its finalizer off.
      const finalizers = current.metadata.finalizers.filter((finalizer) => finalizer !== PROVISIONER_FINALIZER);
      await patchPv(kube, pv.name, {
        metadata: { finalizers, resourceVersion: current.metadata.resourceVersion },
      });
    } else if (Date.now() > deadline) {
      throw new DriverError(
        FailureType.Unavailable,
        `PersistentVolume ${pv.name} is being deleted; its finalizers hold it: ${current.metadata.finalizers?.join(', ')}`,
      );
    }
    await sleep(POLL_MS);
  }
}

/**
 * A move that rolls back after the switch began: the new PV deleted (Retain until the switch ended, so its volume is
 * the move's to delete), and the old PV's policy restored if its claim is still the one it was bound to. Should the
 * claim already be gone, the old PV stays with Retain: it holds the only copy the CO knows, and says so.
 */
export async function undoSwitch(kube: ClaimKube, input: SwitchInput): Promise<string | undefined> {
  const { core } = kube;
  const { moved, newPvName } = input;
  const claim = await readClaim(core, moved.claim.namespace, moved.claim.name);
  const fresh = await readPv(core, newPvName);
  if (fresh && claim?.spec?.volumeName === newPvName && claim.status?.phase === 'Bound') {
    throw new DriverError(
      FailureType.Internal,
      `claim ${moved.claim.namespace}/${moved.claim.name} is bound to the moved copy ${newPvName}: not rolled back`,
    );
  }
  if (fresh?.metadata?.uid) {
    await ignoring(
      404,
      core.deletePersistentVolume({ name: newPvName, body: { preconditions: { uid: fresh.metadata.uid } } }),
    );
    // Gone, not only being deleted, before the rollback deletes the copy it names (a PV bound meanwhile stays).
    if (await readPv(core, newPvName)) {
      throw new DriverError(
        FailureType.Unavailable,
        `PersistentVolume ${newPvName} is being deleted; the rollback waits`,
      );
    }
  }
  const old = await readPv(core, moved.pv.name);
  if (!old || old.metadata?.uid !== moved.pv.uid) return `PersistentVolume ${moved.pv.name} is gone`;
  if (claim?.metadata?.uid !== moved.claim.uid) {
    return (
      `PersistentVolume ${moved.pv.name} keeps reclaim policy Retain: its claim is gone, and the volume it names ` +
      'holds the data'
    );
  }
  const before = old.metadata.annotations?.[RECLAIM_POLICY_BEFORE_MOVE];
  if (before !== undefined) {
    await patchPv(kube, moved.pv.name, {
      metadata: { annotations: { [RECLAIM_POLICY_BEFORE_MOVE]: null } },
      spec: { persistentVolumeReclaimPolicy: before },
    });
  }
  return undefined;
}

/* The steps. */

/** The old PV's policy to Retain first: deleting its claim must not delete the volume that is the only copy yet. */
async function holdOldPv(kube: ClaimKube, input: SwitchInput): Promise<void> {
  const { core } = kube;
  const { pv } = input.moved;
  const current = await readPv(core, pv.name);
  if (!current || current.metadata?.uid !== pv.uid || current.spec?.csi?.volumeHandle !== input.oldVolumeId) {
    // Gone before the switch finished: fine only if the claim already moved (a retry after the retirement began).
    const claim = await readClaim(core, input.moved.claim.namespace, input.moved.claim.name);
    if (claim?.spec?.volumeName === input.newPvName) return;
    throw new DriverError(
      FailureType.FailedPrecondition,
      `PersistentVolume ${pv.name} of volume ${input.oldVolumeId} was deleted during the move: the claim it was ` +
        'bound to no longer wants the volume',
    );
  }
  if (current.spec.persistentVolumeReclaimPolicy === 'Retain') return;
  await patchPv(kube, pv.name, {
    metadata: {
      annotations: { [RECLAIM_POLICY_BEFORE_MOVE]: current.spec.persistentVolumeReclaimPolicy ?? 'Delete' },
      resourceVersion: current.metadata.resourceVersion,
    },
    spec: { persistentVolumeReclaimPolicy: 'Retain' },
  });
}

/**
 * The new PV: the old one's spec with the copy's volume ID, the target's node affinity, and a claimRef by name only
 * (so it binds the claim made again under that name). Retain until the claim is bound (a rollback deletes the copy
 * itself), then the old PV's policy.
 */
async function ensureNewPv(core: CoreV1Api, input: SwitchInput): Promise<void> {
  const { pv, claim } = input.moved;
  const { claimRef: _claim, nodeAffinity: _affinity, csi, ...spec } = pv.spec;
  const body: V1PersistentVolume = {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: {
      name: input.newPvName,
      labels: pv.labels,
      annotations: {
        [PROVISIONED_BY]: input.driverName,
        [MOVED_FROM]: input.oldVolumeId,
        [MOVE_WORKFLOW]: input.moveWorkflowId,
      },
    },
    spec: {
      ...spec,
      csi: { ...csi!, driver: input.driverName, volumeHandle: input.newVolumeId },
      claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: claim.namespace, name: claim.name },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: TOPOLOGY_NODE_KEY, operator: 'In', values: [input.targetNodeId] }] },
          ],
        },
      },
      persistentVolumeReclaimPolicy: 'Retain',
    },
  };
  try {
    await core.createPersistentVolume({ body });
  } catch (error) {
    if (statusOf(error) !== 409) throw error;
    const existing = await readPv(core, input.newPvName);
    if (existing?.spec?.csi?.volumeHandle !== input.newVolumeId) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `PersistentVolume ${input.newPvName} exists and names ${existing?.spec?.csi?.volumeHandle}, not the copy ` +
          `${input.newVolumeId}: delete it, or move again`,
      );
    }
  }
}

/** Once the claim is bound to it, the new PV takes the old one's reclaim policy (the claim's deletion then deletes it). */
async function releaseNewPv(kube: ClaimKube, input: SwitchInput): Promise<void> {
  const { core } = kube;
  const policy = input.moved.pv.reclaimPolicy;
  const current = await readPv(core, input.newPvName);
  if (!current || current.spec?.persistentVolumeReclaimPolicy === policy) return;
  await patchPv(kube, input.newPvName, {
    spec: { persistentVolumeReclaimPolicy: policy },
  });
}

/** The claim made again under its name: its labels, annotations, owners and spec, bound to the new PV by name. */
async function createClaim(core: CoreV1Api, input: SwitchInput): Promise<void> {
  const { claim } = input.moved;
  const metadata: V1ObjectMeta = {
    name: claim.name,
    namespace: claim.namespace,
    labels: claim.labels,
    annotations: claim.annotations,
    ...(claim.ownerReferences.length ? { ownerReferences: claim.ownerReferences } : {}),
  };
  const body: V1PersistentVolumeClaim = {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata,
    spec: { ...claim.spec, volumeName: input.newPvName },
  };
  await ignoring(409, core.createNamespacedPersistentVolumeClaim({ namespace: claim.namespace, body }));
}

async function deleteClaim(core: CoreV1Api, namespace: string, name: string, uid: string): Promise<void> {
  const body = { preconditions: { uid } };
  await ignoring([404, 409], core.deleteNamespacedPersistentVolumeClaim({ namespace, name, body }));
}

/**
 * A Pod on a node that uses the claim and has not finished: its kubelet may still have the volume, and its
 * pvc-protection finalizer would hold the claim's deletion. An unscheduled Pod (pending, its node cordoned) is no
 * user: it starts on the target once the claim is switched.
 */
async function podUsing(core: CoreV1Api, namespace: string, claim: string) {
  const pods = (await core.listNamespacedPod({ namespace })).items;
  const using = pods.find(
    (pod) =>
      pod.spec?.nodeName &&
      pod.status?.phase !== 'Succeeded' &&
      pod.status?.phase !== 'Failed' &&
      (pod.spec.volumes ?? []).some((volume) => volume.persistentVolumeClaim?.claimName === claim),
  );
  return using && { pod: using.metadata?.name ?? '', node: using.spec?.nodeName ?? '' };
}

/**
 * A Pod the scheduler placed through the claim while the switch had it away: a StatefulSet makes a deleted claim again
 * from its template at once, the scheduler may pick a node for its Pending Pod through that claim, and bind the Pod
 * there after the switch replaced the claim with its own. Its kubelet then waits forever ("MountVolume.NodeAffinity
 * check failed"): the copy is on the target. Such a Pod (on another node than the target, not started, made by a
 * controller) is deleted, so that its controller makes it again and the scheduler places it where the data is. At
 * once (grace period 0): a StatefulSet makes its Pod again only once the old one is gone, and no container of it can
 * have run, since kubelet starts none (init containers neither) before the Pod's volumes are mounted, and this one's
 * never can be there. A Pod nobody makes again is its owner's to delete; a started one is not touched.
 */
async function resetStrandedPods(core: CoreV1Api, input: SwitchInput): Promise<string[]> {
  const { namespace, name } = input.moved.claim;
  const pods = (await core.listNamespacedPod({ namespace })).items;
  const reset: string[] = [];
  for (const pod of pods) {
    const uid = pod.metadata?.uid;
    const stranded =
      uid &&
      pod.spec?.nodeName &&
      pod.spec.nodeName !== input.targetNodeId &&
      pod.status?.phase === 'Pending' &&
      ![...(pod.status.initContainerStatuses ?? []), ...(pod.status.containerStatuses ?? [])].some(
        (container) => container.state?.running || container.state?.terminated,
      ) &&
      (pod.metadata?.ownerReferences ?? []).some((owner) => owner.controller) &&
      (pod.spec.volumes ?? []).some((volume) => volume.persistentVolumeClaim?.claimName === name);
    if (!stranded) continue;
    const body = { preconditions: { uid }, gracePeriodSeconds: 0 };
    await ignoring([404, 409], core.deleteNamespacedPod({ namespace, name: pod.metadata?.name ?? '', body }));
    reset.push(`Pod ${namespace}/${pod.metadata?.name} on node ${pod.spec?.nodeName}`);
  }
  return reset;
}

/* Reads and writes that say what a missing object means. */

async function readPv(core: CoreV1Api, name: string): Promise<V1PersistentVolume | undefined> {
  return ignoring(404, core.readPersistentVolume({ name }));
}

async function readClaim(core: CoreV1Api, namespace: string, name: string) {
  return ignoring(404, core.readNamespacedPersistentVolumeClaim({ namespace, name }));
}

/** A JSON merge patch (a `null` removes a key; a resourceVersion in it is a precondition, 409 if it changed). */
async function patchPv({ core, mergePatch }: ClaimKube, name: string, body: object): Promise<void> {
  await core.patchPersistentVolume({ name, body }, mergePatch as Parameters<CoreV1Api['patchPersistentVolume']>[1]);
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
