/**
 * issue 36 items 6 and 7: deploy/README.md's install steps work as written. The kubelet directory change applies to
 * deploy/base's node DaemonSet (the volume names it tests exist) and leaves no path of the old directory; the step-3
 * overlay points the image somewhere (an `images:` block naming image.json's image); with host certificates no
 * node Secret is mounted, so step 2 does not ask for one. test/e2e-k8s/chart.test.ts renders the same snippets with
 * kubectl and helm.
 */
import type { V1DaemonSet } from '@kubernetes/client-node';
import { load as loadYaml } from 'js-yaml';
import fs from 'node:fs';
import path from 'node:path';
import { DEPLOY, applyPatch, loadDeploy } from './components';
import { README, snippetContaining, snippetAfterMarker } from './readme-snippets';

interface Overlay {
  images?: { name: string; newName?: string }[];
  patches?: { target: { kind: string; name: string }; patch: string }[];
}
const [node] = loadDeploy<V1DaemonSet & { kind: string }>('base/node.yaml');

it('the kubelet directory patch moves every kubelet path of the node plugin, and only those', () => {
  const patch = (loadYaml(snippetAfterMarker('kubelet-dir-patch')) as Overlay).patches?.[0];
  expect(patch?.target).toEqual({ kind: 'DaemonSet', name: 'durable-csi-node' });
  const patched = structuredClone(node!);
  applyPatch(patched, loadYaml(patch!.patch) as Parameters<typeof applyPatch>[1]);
  const text = JSON.stringify(patched);
  expect(text).not.toContain('"/var/lib/kubelet');
  expect(text).not.toContain('=/var/lib/kubelet');
  const moved = text.match(/\/var\/snap\/microk8s\/common\/var\/lib\/kubelet/g) ?? [];
  expect(moved).toHaveLength(8);
  // Nothing else changed: the pool and /registration stay where they were.
  expect(text).toContain('"mountPath":"/var/lib/durable-csi/pool"');
  expect(text).toContain('"mountPath":"/registration"');
});

it('the kubelet directory patch fails, instead of patching something else, on a DaemonSet laid out otherwise', () => {
  const patch = (loadYaml(snippetAfterMarker('kubelet-dir-patch')) as Overlay).patches?.[0];
  const reordered = structuredClone(node!);
  reordered.spec!.template.spec!.volumes!.reverse();
  expect(() => applyPatch(reordered, loadYaml(patch!.patch) as Parameters<typeof applyPatch>[1])).toThrow(/^test /);
});

it("the step-3 overlay points the driver's image at your registry", () => {
  const overlay = loadYaml(snippetContaining('# my-cluster/kustomization.yaml')) as Overlay;
  const image = (JSON.parse(fs.readFileSync(path.join(DEPLOY, 'image.json'), 'utf8')) as { name: string }).name;
  expect(overlay.images?.map((entry) => entry.name)).toEqual([image]);
  expect(overlay.images?.[0]?.newName).not.toEqual(image);
});

it('with host certificates the node Secret is replaced by the host directory, and step 2 says to skip it', () => {
  // Rendered with kubectl, the node DaemonSet then names no node Secret: test/e2e-k8s/chart.test.ts.
  const component = fs.readFileSync(
    path.join(DEPLOY, 'components/temporal-node-host-identity/kustomization.yaml'),
    'utf8',
  );
  expect(component).toMatch(/- name: temporal-tls\s+secret: null\s+hostPath:/);
  expect(fs.readFileSync(README, 'utf8')).toMatch(
    /skip the\s+`durable-csi-temporal-node-tls` Secret: nothing mounts it/,
  );
});
