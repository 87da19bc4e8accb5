import fs from 'node:fs';
import path from 'node:path';

interface Spec {
  ref: string;
  node: string;
  engines: string;
  debian: { packages: string[] };
  env: Record<string, string>;
  entrypoint: string[];
}
// Plain Node scripts (npm run image runs them before node_modules may exist), loaded as such.
const spec = jest.requireActual<{
  driverSpec(): Spec;
  satisfies(version: string, range: string): boolean;
  SIDECARS: { ref: string }[];
}>('../../../scripts/image/spec');

const root = path.resolve(__dirname, '../../..');

describe('the image names deploy/ uses are the ones npm run image builds', () => {
  // csi-snapshotter is the snapshots component's (deploy/components/snapshots), not the base's.
  const manifests = ['base/controller.yaml', 'base/node.yaml', 'components/snapshots/kustomization.yaml'].map((file) =>
    fs.readFileSync(path.join(root, 'deploy', file), 'utf8'),
  );
  const images = manifests.flatMap((text) => [...text.matchAll(/^\s+image: (\S+)$/gm)].map((m) => m[1]));

  it('names the driver image by package.json version', () => {
    expect(spec.driverSpec().ref).toBe('ghcr.io/durable-csi/durable-csi:0.1.0');
    expect(images.filter((image) => image!.startsWith('ghcr.io/'))).toEqual([
      spec.driverSpec().ref,
      spec.driverSpec().ref,
    ]);
  });

  it('names each sidecar image after the version scripts/install-k8s-tools.js builds', () => {
    for (const sidecar of spec.SIDECARS) expect(images).toContain(sidecar.ref);
    // One set builds them all from one module graph; each keeps its own module's version.
    expect(spec.SIDECARS.map((sidecar) => sidecar.ref)).toEqual([
      'registry.k8s.io/sig-storage/csi-provisioner:v6.4.0',
      'registry.k8s.io/sig-storage/csi-resizer:v2.3.0',
      'registry.k8s.io/sig-storage/csi-snapshotter:v8.7.0',
    ]);
  });
});

describe('the pinned Node.js satisfies package.json engines', () => {
  it('holds for the pin', () => {
    expect(spec.satisfies(spec.driverSpec().node, spec.driverSpec().engines)).toBe(true);
  });

  it.each([
    ['20.19.0', '>=20.19', true],
    ['20.18.3', '>=20.19', false],
    ['22.1.0', '>=20.19 <22', false],
    ['21.7.3', '>=20.19 <22', true],
    ['18.20.0', '<19 || >=22', true],
    ['20.20.2', '20.20.2', true],
    ['20.20.1', '=20.20.2', false],
  ])('%s against "%s" is %s', (version, range, expected) => {
    expect(spec.satisfies(version, range)).toBe(expected);
  });

  it('refuses a range it cannot read rather than guess', () => {
    expect(() => spec.satisfies('20.20.2', '^20.19')).toThrow(/unsupported engines comparator/);
  });
});
