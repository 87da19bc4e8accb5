/**
 * issue 21 item 8: durable-csi's own roles grant exactly what its code calls. The needs are read from the sources
 * (every `core.<method>(` and informer path under kubernetes/), so a new API call without its rule, or a rule no
 * code uses, fails here; the e2e (test/e2e-k8s) runs the controller as this ServiceAccount against a real API server.
 */
import type { V1ClusterRole, V1PolicyRule, V1Role } from '@kubernetes/client-node';
import { loadAll as loadAllYaml } from 'js-yaml';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../../common/project-root';
import { SNAPSHOT_CONTENTS } from '../../../kubernetes/snapshot-contents';

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
  listPersistentVolumeClaimForAllNamespaces: { resource: 'persistentvolumeclaims', verb: 'list', namespaced: false },
  createNamespacedEvent: { resource: 'events', verb: 'create', namespaced: true },
};
const INFORMER_RESOURCES: Record<string, string> = { '/api/v1/nodes': 'nodes' };
/** client-node's CustomObjectsApi method -> the verb it needs of the resource its request names. */
const CUSTOM_METHOD_VERBS: Record<string, string> = { listClusterCustomObject: 'list' };
/** The custom resources the code names (`{ group, version, plural }` constants), by the constant's name. */
const CUSTOM_RESOURCES: Record<string, { group: string; plural: string }> = { SNAPSHOT_CONTENTS };

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
    for (const [, apiPath] of source.matchAll(/makeInformer<\w+>\([^,]+,\s*'([^']+)'/g)) {
      const resource = apiPath && INFORMER_RESOURCES[apiPath];
      if (!resource) throw new Error(`kubernetes/${file} watches ${apiPath}: add it to INFORMER_RESOURCES`);
      cluster.add(`${resource} list`).add(`${resource} watch`);
    }
    for (const [, method, constant] of source.matchAll(/\bcustom\.(\w+)\(\{ \.\.\.(\w+) \}\)/g)) {
      const verb = method && CUSTOM_METHOD_VERBS[method];
      const resource = constant && CUSTOM_RESOURCES[constant];
      if (!verb || !resource) throw new Error(`kubernetes/${file} calls custom.${method} on ${constant}: add it here`);
      cluster.add(`${qualified(resource.group, resource.plural)} ${verb}`);
    }
    if (/\bcustom\.\w+\((?!\{ \.\.\.\w+ \}\))/.test(source)) {
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
