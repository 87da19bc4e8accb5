import { execFileSync } from 'node:child_process';
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
  AGNHOST_IMAGE: string;
  SUITE_SHELL_IMAGES: { name: string; ref: string }[];
  PAUSE_IMAGE: string;
}>('../../../scripts/image/spec');
const { KUBERNETES_VERSION } = jest.requireActual<{ KUBERNETES_VERSION: string }>('../../../scripts/install-k8s-tools');

const buildInfo = jest.requireActual<{
  describeBuild(dir: string): { version: string };
  newestRelease(dir: string): string;
}>('../../../scripts/build-info');
const root = path.resolve(__dirname, '../../..');

describe('the image names deploy/ uses are the ones npm run image builds', () => {
  // csi-snapshotter is the snapshots component's (deploy/components/snapshots), not the base's.
  const manifests = ['base/controller.yaml', 'base/node.yaml', 'components/snapshots/kustomization.yaml'].map((file) =>
    fs.readFileSync(path.join(root, 'deploy', file), 'utf8'),
  );
  const images = manifests.flatMap((text) => [...text.matchAll(/^\s+image: (\S+)$/gm)].map((m) => m[1]));

  it("tags the driver image with the build's version and deploy/ names the newest release", () => {
    const { version } = buildInfo.describeBuild(root);
    expect(spec.driverSpec().ref).toBe(`ghcr.io/durable-csi/durable-csi:${version}`);
    // Between releases a -dev build's image has no published twin: the manifests name the newest release.
    const release = buildInfo.newestRelease(root);
    expect(images.filter((image) => image!.startsWith('ghcr.io/'))).toEqual([
      `ghcr.io/durable-csi/durable-csi:${release}`,
      `ghcr.io/durable-csi/durable-csi:${release}`,
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

/**
 * The storage suite's Pods name their images by the Kubernetes the suite is built from; under another tag they
 * would not find the images the node imported (imagePullPolicy IfNotPresent, no registry). Read from that very
 * module (the Go module cache, as the build has it), so moving Kubernetes without the images fails here.
 */
describe('the images of the Kubernetes the tests build', () => {
  const moduleDir = (): string => {
    const go = process.env.GO ?? 'go';
    const info = execFileSync(go, ['mod', 'download', '-json', `k8s.io/kubernetes@${KUBERNETES_VERSION}`], {
      encoding: 'utf8',
      env: { ...process.env, GOFLAGS: '-mod=mod', GOWORK: 'off' },
      cwd: root,
    });
    return (JSON.parse(info) as { Dir: string }).Dir;
  };
  let dir = '';
  let manifest = '';
  beforeAll(() => {
    dir = moduleDir();
    manifest = fs.readFileSync(path.join(dir, 'test', 'utils', 'image', 'manifest.go'), 'utf8');
  });
  /** `configs[Agnhost] = Config{list.PromoterE2eRegistry, "agnhost", "2.66.1"}` -> the tag. */
  const tag = (config: string, name: string): string | undefined =>
    new RegExp(`configs\\[${config}\\] = Config\\{list\\.PromoterE2eRegistry, "${name}", "([^"]+)"\\}`).exec(
      manifest,
    )?.[1];

  it("names agnhost and the suite's shell images as its test/utils/image/manifest.go does", () => {
    const registry = 'registry.k8s.io/e2e-test-images';
    expect(spec.AGNHOST_IMAGE).toBe(`${registry}/agnhost:${tag('Agnhost', 'agnhost')}`);
    expect(Object.fromEntries(spec.SUITE_SHELL_IMAGES.map((image) => [image.name, image.ref]))).toEqual({
      'suite-busybox': `${registry}/busybox:${tag('BusyBox', 'busybox')}`,
      'suite-nginx': `${registry}/nginx:${tag('Nginx', 'nginx')}`,
      'suite-glibc-dns-testing': `${registry}/glibc-dns-testing:${tag('GlibcDnsTesting', 'glibc-dns-testing')}`,
    });
  });

  it("names pause as its kubeadm does (containerd's sandbox_image)", () => {
    const constants = fs.readFileSync(path.join(dir, 'cmd', 'kubeadm', 'app', 'constants', 'constants.go'), 'utf8');
    expect(spec.PAUSE_IMAGE).toBe(`registry.k8s.io/pause:${/PauseVersion = "([^"]+)"/.exec(constants)?.[1]}`);
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
