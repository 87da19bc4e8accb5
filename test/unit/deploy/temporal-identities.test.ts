/**
 * issue 21 item 2: the controller and the node agents never share a Temporal credential. Each credential component
 * mounts one Secret into the controller Deployment and a different one into the node DaemonSet (a kubelet can
 * read every Secret its Pods mount, so a shared one would hand the controller's rights to every node's root).
 * test/e2e-k8s renders the components with kubectl and checks the same on the result.
 */
import { loadAll as loadAllYaml } from 'js-yaml';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../../common/project-root';

const COMPONENTS = path.join(findProjectRoot(), 'deploy/components');
interface Component {
  patches?: { target: { kind: string }; path: string }[];
  /** Components it includes (temporal-mtls is temporal-mtls-system-roots plus the CA flag). */
  components?: string[];
}
interface JsonPatchOp {
  op: string;
  path: string;
  value?: { secret?: { secretName?: string } };
}

/** The Secret each workload kind gets from a component, the components it includes counted in. */
function secretsByKind(component: string, result: Record<string, string[]> = {}): Record<string, string[]> {
  const dir = path.join(COMPONENTS, component);
  const [kustomization] = loadAllYaml(fs.readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8')) as Component[];
  for (const included of kustomization?.components ?? []) secretsByKind(path.join(component, included), result);
  for (const patch of kustomization?.patches ?? []) {
    const [ops] = loadAllYaml(fs.readFileSync(path.join(dir, patch.path), 'utf8')) as JsonPatchOp[][];
    const secrets = (ops ?? []).flatMap((op) => (op.value?.secret?.secretName ? [op.value.secret.secretName] : []));
    (result[patch.target.kind] ??= []).push(...secrets);
  }
  return result;
}

describe.each(['temporal-mtls', 'temporal-mtls-system-roots', 'temporal-api-key'])('components/%s', (component) => {
  const secrets = secretsByKind(component);

  it('mounts one Secret in the controller and another in the node agents', () => {
    expect(secrets.Deployment).toHaveLength(1);
    expect(secrets.DaemonSet).toHaveLength(1);
    expect(secrets.Deployment?.[0]).toMatch(/-controller-/);
    expect(secrets.DaemonSet?.[0]).toMatch(/-node-/);
    expect(secrets.Deployment?.[0]).not.toEqual(secrets.DaemonSet?.[0]);
  });
});
