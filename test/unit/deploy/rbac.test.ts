/**
 * issue 21 item 8: durable-csi's own roles grant exactly what its code calls. The needs are read from the sources
 * (every `core.<method>(` and informer path under kubernetes/), so a new API call without its rule, or a rule no
 * code uses, fails here; the e2e (test/e2e-k8s) runs the controller as this ServiceAccount against a real API server.
 */
import type { V1ClusterRole, V1Deployment, V1PolicyRule, V1Role } from '@kubernetes/client-node';
import { load as loadYaml, loadAll as loadAllYaml } from 'js-yaml';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../../common/project-root';
import { GROUP_SNAPSHOT_CONTENTS, SNAPSHOT_CONTENTS } from '../../../kubernetes/snapshot-contents';
import { VOLUME_SNAPSHOTS } from '../../../kubernetes/snapshot-switch';
import { componentPatches, componentResources, loadDeploy, withComponent } from './components';

const ROOT = findProjectRoot();
const KUBERNETES_CODE = path.join(ROOT, 'kubernetes');
type RbacObject = (V1ClusterRole | V1Role) & { kind: string };

const manifests = loadAllYaml(
  fs.readFileSync(path.join(ROOT, 'deploy/base/controller-rbac.yaml'), 'utf8'),
) as RbacObject[];
const role = (kind: string, name: string) => {
  const found = manifests.find((object) => object.kind === kind && object.metadata?.name === name);
  if (!found) throw new Error(`controller-rbac.yaml has no ${kind} ${name}`);
  return found;
};

/** client-node's CoreV1Api method -> the resource and verb it needs. */
const METHOD_NEEDS: Record<string, { resource: string; verb: string; namespaced: boolean }> = {
  listNode: { resource: 'nodes', verb: 'list', namespaced: false },
  readNode: { resource: 'nodes', verb: 'get', namespaced: false },
  listPersistentVolume: { resource: 'persistentvolumes', verb: 'list', namespaced: false },
  readPersistentVolume: { resource: 'persistentvolumes', verb: 'get', namespaced: false },
  createPersistentVolume: { resource: 'persistentvolumes', verb: 'create', namespaced: false },
  patchPersistentVolume: { resource: 'persistentvolumes', verb: 'patch', namespaced: false },
  deletePersistentVolume: { resource: 'persistentvolumes', verb: 'delete', namespaced: false },
  readNamespacedPersistentVolumeClaim: { resource: 'persistentvolumeclaims', verb: 'get', namespaced: false },
  createNamespacedPersistentVolumeClaim: { resource: 'persistentvolumeclaims', verb: 'create', namespaced: false },
  deleteNamespacedPersistentVolumeClaim: { resource: 'persistentvolumeclaims', verb: 'delete', namespaced: false },
  listNamespacedPod: { resource: 'pods', verb: 'list', namespaced: false },
  deleteNamespacedPod: { resource: 'pods', verb: 'delete', namespaced: false },
  patchNamespacedPersistentVolumeClaim: { resource: 'persistentvolumeclaims', verb: 'patch', namespaced: false },
  listPersistentVolumeClaimForAllNamespaces: { resource: 'persistentvolumeclaims', verb: 'list', namespaced: false },
  createNamespacedEvent: { resource: 'events', verb: 'create', namespaced: true },
};
const INFORMER_RESOURCES: Record<string, string> = {
  '/api/v1/nodes': 'nodes',
  '/api/v1/persistentvolumeclaims': 'persistentvolumeclaims',
  // The agents' Pods, in the namespace --agent-namespace names (any: so the ClusterRole).
  '/api/v1/namespaces/${namespace}/pods': 'pods',
};
/** client-node's CustomObjectsApi method -> the verb it needs of the resource its request names. */
const CUSTOM_METHOD_VERBS: Record<string, string> = {
  listClusterCustomObject: 'list',
  getClusterCustomObject: 'get',
  createClusterCustomObject: 'create',
  patchClusterCustomObject: 'patch',
  deleteClusterCustomObject: 'delete',
  getNamespacedCustomObject: 'get',
  createNamespacedCustomObject: 'create',
  deleteNamespacedCustomObject: 'delete',
};
/** The custom resources the code names (`{ group, version, plural }` constants), by the constant's name. */
const CUSTOM_RESOURCES: Record<string, { group: string; plural: string }> = {
  SNAPSHOT_CONTENTS,
  GROUP_SNAPSHOT_CONTENTS,
  VOLUME_SNAPSHOTS,
};
/**
 * Helpers that make one CustomObjectsApi call on the resource passed to them as `resource`: their own call is
 * skipped and each call site (`helper<T>(custom, CONSTANT`) is read instead, with the helper's method.
 */
const CUSTOM_HELPERS: Record<string, string> = { listOurs: 'listClusterCustomObject' };

/** `<resource> <verb>`, the resource qualified by its API group outside the core group. */
function grants(rules: V1PolicyRule[]): Set<string> {
  const granted = new Set<string>();
  for (const rule of rules)
    for (const group of rule.apiGroups ?? [''])
      for (const resource of rule.resources ?? [])
        for (const verb of rule.verbs) granted.add(`${qualified(group, resource)} ${verb}`);
  return granted;
}

function qualified(group: string, resource: string): string {
  return group === '' ? resource : `${resource}.${group}`;
}

function needs(): { cluster: Set<string>; namespaced: Set<string> } {
  const cluster = new Set<string>();
  const namespaced = new Set<string>();
  for (const file of fs.readdirSync(KUBERNETES_CODE).filter((name) => name.endsWith('.ts'))) {
    const source = fs.readFileSync(path.join(KUBERNETES_CODE, file), 'utf8');
    for (const [, method] of source.matchAll(/\bcore\.(\w+)\(/g)) {
      const need = method && METHOD_NEEDS[method];
      if (!need) throw new Error(`kubernetes/${file} calls core.${method}: add what it needs to METHOD_NEEDS`);
      (need.namespaced ? namespaced : cluster).add(`${need.resource} ${need.verb}`);
    }
    for (const [, apiPath] of source.matchAll(/makeInformer<\w+>\([^,]+,\s*['`]([^'`]+)['`]/g)) {
      const resource = apiPath && INFORMER_RESOURCES[apiPath];
      if (!resource) throw new Error(`kubernetes/${file} watches ${apiPath}: add it to INFORMER_RESOURCES`);
      cluster.add(`${resource} list`).add(`${resource} watch`);
    }
    const helpers = Object.keys(CUSTOM_HELPERS).filter((helper) => source.includes(`function ${helper}<`));
    // `custom.method({ ...CONSTANT })`, or with more fields after the constant (`{ ...CONSTANT, name, body }`).
    const calls = [...source.matchAll(/\bcustom\.(\w+)\(\s*\{ \.\.\.(\w+)[ ,]/g)].map(([, method, constant]) => [
      method,
      constant,
    ]);
    for (const helper of helpers) {
      const inHelper = calls.findIndex(
        ([method, constant]) => constant === 'resource' && method === CUSTOM_HELPERS[helper],
      );
      if (inHelper < 0) throw new Error(`kubernetes/${file}: ${helper} no longer calls ${CUSTOM_HELPERS[helper]}`);
      calls.splice(inHelper, 1);
      for (const [, constant] of source.matchAll(new RegExp(`\\b${helper}<\\w+>\\(custom, (\\w+)`, 'g')))
        calls.push([CUSTOM_HELPERS[helper], constant]);
    }
    for (const [method, constant] of calls) {
      const verb = method && CUSTOM_METHOD_VERBS[method];
      const resource = constant && CUSTOM_RESOURCES[constant];
      if (!verb || !resource) throw new Error(`kubernetes/${file} calls custom.${method} on ${constant}: add it here`);
      cluster.add(`${qualified(resource.group, resource.plural)} ${verb}`);
    }
    if (/\bcustom\.\w+\((?!\s*\{ \.\.\.\w+[ ,])/.test(source)) {
      throw new Error(`kubernetes/${file} calls the CustomObjectsApi in a form this test does not read`);
    }
  }
  return { cluster, namespaced };
}

describe("durable-csi's own roles", () => {
  it('the ClusterRole grants exactly the cluster-wide reads the code makes', () => {
    expect([...grants(role('ClusterRole', 'durable-csi-controller').rules ?? [])].sort()).toEqual(
      [...needs().cluster].sort(),
    );
  });

  it('Events are created in one namespace only (a Role), never patched or updated', () => {
    expect([...grants(role('Role', 'durable-csi-controller-events').rules ?? [])].sort()).toEqual(
      [...needs().namespaced].sort(),
    );
    const cluster = grants(role('ClusterRole', 'durable-csi-controller').rules ?? []);
    expect([...cluster].filter((grant) => grant.startsWith('events '))).toEqual([]);
  });

  it("the Events Role and its binding name the namespace the API server takes them in (not the driver's)", () => {
    for (const kind of ['Role', 'RoleBinding'])
      expect(role(kind, 'durable-csi-controller-events').metadata?.namespace).toBe('default');
    const code = fs.readFileSync(path.join(KUBERNETES_CODE, 'pv-events.ts'), 'utf8');
    expect(code).toMatch(/const EVENT_NAMESPACE = 'default';/);
  });
});

describe("the sidecars' roles", () => {
  it('csi-resizer reads no Pods while it does not handle volume-in-use errors', () => {
    const text = fs.readFileSync(path.join(ROOT, 'deploy/base/controller.yaml'), 'utf8');
    expect(text).toContain('--handle-volume-inuse-error=false');
    expect(
      [...grants(role('ClusterRole', 'durable-csi-external-resizer').rules ?? [])].filter((g) => g.startsWith('pods ')),
    ).toEqual([]);
  });
});

describe('components/snapshots', () => {
  type Bound = RbacObject & {
    subjects?: { kind: string; name: string; namespace?: string }[];
    roleRef?: { kind: string; name: string };
  };
  const objects = componentResources<Bound & { driver?: string; deletionPolicy?: string; parameters?: unknown }>(
    'snapshots',
  );
  const clusterRole = (name: string) => {
    const found = objects.find((object) => object.kind === 'ClusterRole' && object.metadata?.name === name);
    if (!found) throw new Error(`components/snapshots has no ClusterRole ${name}`);
    return found;
  };
  const apiGroupOf = (resource: string) =>
    resource === 'events'
      ? ''
      : resource.startsWith('volumegroup')
        ? 'groupsnapshot.storage.k8s.io'
        : 'snapshot.storage.k8s.io';
  const snapshotGrants = (rules: V1PolicyRule[]) => {
    for (const rule of rules)
      for (const resource of rule.resources ?? []) expect(rule.apiGroups).toEqual([apiGroupOf(resource)]);
    // grants() names a resource with its API group; the group was checked above, the names below are upstream's.
    return [...grants(rules)].map((grant) => grant.replace(/\.(group)?snapshot\.storage\.k8s\.io /, ' ')).sort();
  };
  const [controller] = loadDeploy<V1Deployment>('base/controller.yaml');
  const rendered = controller && withComponent(controller, 'snapshots');
  const sidecar = (name: string) => rendered?.spec?.template.spec?.containers.find((c) => c.name === name);

  it("csi-snapshotter v8.7.0 gets exactly upstream's rules for its watches, status updates and Events", () => {
    // external-snapshotter v8.7.0 deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml, less the optional
    // Secrets (no class names any).
    expect(snapshotGrants(clusterRole('durable-csi-external-snapshotter').rules ?? [])).toEqual(
      [
        ...['volumesnapshotclasses', 'volumegroupsnapshotclasses'].flatMap((resource) =>
          ['get', 'list', 'watch'].map((verb) => `${resource} ${verb}`),
        ),
        ...['volumesnapshotcontents', 'volumegroupsnapshotcontents'].flatMap((resource) => [
          ...['get', 'list', 'watch', 'update', 'patch'].map((verb) => `${resource} ${verb}`),
          `${resource}/status update`,
          `${resource}/status patch`,
        ]),
        ...['list', 'watch', 'create', 'update', 'patch'].map((verb) => `events ${verb}`),
      ].sort(),
    );
  });

  it('group snapshots are on (the GA gate at its default); components/snapshots-without-groups turns them off', () => {
    const gate = (args: string[] | undefined) => (args ?? []).filter((arg) => arg.startsWith('--feature-gates'));
    expect(gate(sidecar('csi-snapshotter')?.args)).toEqual([]);
    expect(objects.filter((object) => object.kind === 'VolumeGroupSnapshotClass').map((o) => o.metadata?.name)).toEqual(
      ['durable-csi'],
    );
    const off = rendered && withComponent(rendered, 'snapshots-without-groups');
    const offSidecar = off?.spec?.template.spec?.containers.find((c) => c.name === 'csi-snapshotter');
    expect(gate(offSidecar?.args)).toEqual(['--feature-gates=CSIVolumeGroupSnapshot=false']);
    // Its other patch deletes the class (kustomize's `$patch: delete`; chart.test.ts renders it with kubectl).
    expect(componentPatches('snapshots-without-groups').map((patch) => loadYaml(patch.patch))).toContainEqual({
      $patch: 'delete',
      apiVersion: 'groupsnapshot.storage.k8s.io/v1',
      kind: 'VolumeGroupSnapshotClass',
      metadata: { name: 'durable-csi' },
    });
  });

  it('csi-provisioner reads snapshots for restores and manages their source-protection finalizer; nothing more', () => {
    expect(snapshotGrants(clusterRole('durable-csi-external-provisioner-snapshots').rules ?? [])).toEqual(
      [
        'volumesnapshots get',
        'volumesnapshots list',
        'volumesnapshots watch',
        'volumesnapshots update',
        'volumesnapshotcontents get',
      ].sort(),
    );
  });

  it("both are bound to the controller Pod's ServiceAccount; leader election uses the base's namespace Role", () => {
    for (const name of ['durable-csi-external-snapshotter', 'durable-csi-external-provisioner-snapshots']) {
      const binding = objects.find((object) => object.kind === 'ClusterRoleBinding' && object.metadata?.name === name);
      expect(binding?.roleRef).toMatchObject({ kind: 'ClusterRole', name });
      expect(binding?.subjects).toEqual([
        { kind: 'ServiceAccount', name: 'durable-csi-controller', namespace: 'durable-csi' },
      ]);
    }
    expect(rendered?.spec?.template.spec?.serviceAccountName).toBe('durable-csi-controller');
    expect(sidecar('csi-snapshotter')?.args).toEqual(
      expect.arrayContaining(['--leader-election', '--leader-election-namespace=$(NAMESPACE)']),
    );
    for (const verb of ['get', 'watch', 'list', 'delete', 'update', 'create'])
      expect(grants(role('Role', 'durable-csi-controller-sidecars').rules ?? [])).toContain(
        `leases.coordination.k8s.io ${verb}`,
      );
  });

  it('the sidecar talks to the same socket as the others; the driver serves snapshots (--snapshots)', () => {
    const provisioner = sidecar('csi-provisioner');
    const snapshotter = sidecar('csi-snapshotter');
    expect(snapshotter?.image).toBe('registry.k8s.io/sig-storage/csi-snapshotter:v8.7.0');
    expect(snapshotter?.args).toContain('--csi-address=$(ADDRESS)');
    expect(snapshotter?.env?.find((v) => v.name === 'ADDRESS')).toEqual(
      provisioner?.env?.find((v) => v.name === 'ADDRESS'),
    );
    expect(snapshotter?.volumeMounts).toEqual(provisioner?.volumeMounts);
    expect(snapshotter?.securityContext).toEqual(provisioner?.securityContext);
    // The sidecar's --timeout above the driver's --call-wait (an unfinished copy answers ABORTED in time).
    const seconds = (args: string[] | undefined, flag: string) =>
      Number(/=(\d+)s$/.exec(args?.find((arg) => arg.startsWith(`${flag}=`)) ?? '')?.[1]);
    const driver = rendered?.spec?.template.spec?.containers[0];
    expect(driver?.name).toBe('durable-csi');
    expect(seconds(snapshotter?.args, '--timeout')).toBeGreaterThan(seconds(driver?.args, '--call-wait'));
    expect(driver?.args).toContain('--snapshots');
    // The base alone serves none (its clusters may have no snapshot CRDs). Its snapshot rules are durable-csi's own:
    // reads for the orphan report (contents and group contents), which says "not checked" where the CRDs are missing,
    // and a snapshot move's switch (kubernetes/snapshot-switch.ts), which a cluster without the CRDs never asks for.
    expect(controller?.spec?.template.spec?.containers[0]?.args).not.toContain('--snapshots');
    const snapshotRules = manifests
      .filter((object) => (object.rules ?? []).some((rule) => rule.apiGroups?.includes('snapshot.storage.k8s.io')))
      .map((object) => [object.metadata?.name, [...grants(object.rules ?? [])].filter((g) => g.includes('snapshot'))]);
    expect(snapshotRules).toEqual([
      [
        'durable-csi-controller',
        [
          ...['get', 'list', 'create', 'patch', 'delete'].map(
            (verb) => `volumesnapshotcontents.snapshot.storage.k8s.io ${verb}`,
          ),
          ...['get', 'create', 'delete'].map((verb) => `volumesnapshots.snapshot.storage.k8s.io ${verb}`),
          'volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io list',
        ],
      ],
    ]);
  });

  it.each(['VolumeSnapshotClass', 'VolumeGroupSnapshotClass'])(
    'the %s durable-csi names the CSIDriver of deploy/base and deletes the copies with the snapshot',
    (kind) => {
      const [driver] = loadDeploy<{ metadata: { name: string } }>('base/csidriver.yaml');
      const snapshotClass = objects.find((object) => object.kind === kind);
      expect(snapshotClass?.metadata?.name).toBe('durable-csi');
      expect(snapshotClass?.driver).toBe(driver?.metadata.name);
      expect(snapshotClass?.deletionPolicy).toBe('Delete');
      expect(snapshotClass?.parameters).toBeUndefined();
    },
  );
});
