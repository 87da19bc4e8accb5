import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../temporal-dev/project-root';
import { imageRef, type ImageTars } from './images';

/** deploy/'s image names, mapped to the images built here (kustomize `images:`), by repository name. */
const DEPLOY_IMAGES: Record<string, string> = {
  'ghcr.io/durable-csi/durable-csi': 'durable-csi',
  'registry.k8s.io/sig-storage/csi-provisioner': 'csi-provisioner',
  'registry.k8s.io/sig-storage/csi-resizer': 'csi-resizer',
  'registry.k8s.io/sig-storage/csi-snapshotter': 'csi-snapshotter',
};

/**
 * The overlay the test applies: deploy/base (and shipped components) as they are, but for the two things the
 * issue allows: image names and the Temporal address. Written into the run directory, pointing back at deploy/.
 * The test's Temporal is the plaintext dev server at a non-loopback address, so the shipped temporal-insecure
 * component is always in: it is what a dev cluster with such a Temporal applies (deploy/README.md). So is
 * dir-quota-none: the node's pool is a directory of this machine, whose kernel has no quota support. And snapshots:
 * the node's cluster has the snapshot CRDs and snapshot-controller (RealNode.startSnapshotController), so deploy/
 * runs as a cluster with VolumeSnapshots would run it, csi-snapshotter sidecar and VolumeSnapshotClass included.
 */
export function writeOverlay(
  dir: string,
  images: ImageTars,
  temporal: string,
  components: string[] = [],
  /** Whose deploy/: this checkout's, or a release's (release.ts). */
  deploy = path.join(findProjectRoot(), 'deploy'),
): string {
  const used = [...new Set(['temporal-insecure', 'dir-quota-none', 'snapshots', ...components])];
  fs.mkdirSync(dir, { recursive: true });
  const rel = (sub: string) => path.relative(dir, path.join(deploy, sub));
  const lines = [
    'apiVersion: kustomize.config.k8s.io/v1beta1',
    'kind: Kustomization',
    'resources:',
    `  - ${rel('base')}`,
    'components:',
    ...used.map((c) => `  - ${rel(path.join('components', c))}`),
    'images:',
    ...Object.entries(DEPLOY_IMAGES).flatMap(([name, repo]) => {
      const ref = imageRef(images, repo);
      const at = ref.lastIndexOf(':');
      return [`  - name: ${name}`, `    newName: ${ref.slice(0, at)}`, `    newTag: ${ref.slice(at + 1)}`];
    }),
    'patches:',
    '  - target: { kind: ConfigMap, name: durable-csi-temporal }',
    '    patch: |-',
    `      - { op: replace, path: /data/TEMPORAL_ADDRESS, value: "${temporal}" }`,
    '',
  ];
  fs.writeFileSync(path.join(dir, 'kustomization.yaml'), lines.join('\n'));
  return dir;
}
