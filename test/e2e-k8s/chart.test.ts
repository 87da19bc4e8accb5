import type { V1PodSpec } from '@kubernetes/client-node';
import { load as loadYaml } from 'js-yaml';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findProjectRoot } from '../../common/project-root';
import { ControlPlane } from './control-plane';
import { SNAPSHOT_CRDS } from './snapshot-objects';
import { k8sTools } from './tools';
import { snippetAfterMarker, snippetContaining } from '../unit/deploy/readme-snippets';
import {
  CHART,
  chartMixes,
  parseAll,
  type KustomizePatch,
  chartTools,
  kustomizeObjects,
  normalise,
  objectKey,
  renderChart,
  type KubeObject,
} from './chart-render';

/**
 * issue 36 item 1: the Helm chart (deploy/chart) and deploy/ (kustomize) are one driver. Every documented values mix
 * (the chart's defaults and deploy/chart/ci/*-values.yaml) passes `helm lint`, renders with `helm template`, and is
 * accepted by a real API server (server-side dry run); a mix whose first line names its kustomize equivalent renders
 * exactly what `kubectl kustomize` renders of deploy/base with those components (Helm's own labels and the Namespace
 * aside), so a change to one that is not made to the other fails here. The real-kubelet install and upgrade with the
 * chart: test/e2e-node/chart-install.test.ts.
 */
jest.setTimeout(180_000);

const ROOT = findProjectRoot();
const tools = k8sTools(['kubernetes', 'sidecars']);
const { helm } = chartTools();
const mixes = chartMixes();
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-chart-'));
const kubectl = (args: string[], input?: string) =>
  execFileSync(tools.kubectl, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });

afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

describe.each(mixes)('values mix $name', (mix) => {
  it('passes helm lint', () => {
    const output = execFileSync(helm, ['lint', '--strict', CHART, ...mix.valuesArgs], { encoding: 'utf8' });
    expect(output).toContain('0 chart(s) failed');
  });

  const kustomize = mix.kustomize;
  // The others say why nothing in deploy/ renders the same (checked below) and are checked by shape.
  if (kustomize)
    it(`renders what deploy/base with ${kustomize.join(', ')} renders`, () => {
      const rendered = renderChart(helm, mix.valuesArgs);
      const config = rendered.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'durable-csi-temporal') as
        (KubeObject & { data: { TEMPORAL_ADDRESS: string; TEMPORAL_NAMESPACE: string } }) | undefined;
      const temporal = config && { address: config.data.TEMPORAL_ADDRESS, namespace: config.data.TEMPORAL_NAMESPACE };
      const byKey = (objects: KubeObject[]) => new Map(normalise(objects).map((o) => [objectKey(o), o]));
      const chart = byKey(rendered);
      const kustomized = byKey(kustomizeObjects(kubectl, work, mix.name, { components: kustomize, temporal }));
      expect([...chart.keys()].sort()).toEqual([...kustomized.keys()].sort());
      for (const [key, object] of chart) expect({ [key]: object }).toEqual({ [key]: kustomized.get(key) });
    });
});

it('every ci/ values file says what kustomize renders the same, or why nothing does', () => {
  for (const mix of mixes.filter((m) => m.file))
    expect(mix.kustomize !== undefined || mix.noKustomizeBecause !== undefined).toBe(true);
  // The defaults and the kustomize-paired mixes cover every component of deploy/.
  const covered = new Set(mixes.flatMap((mix) => mix.kustomize ?? []));
  const components = fs.readdirSync(path.join(ROOT, 'deploy/components')).map((name) => `components/${name}`);
  expect(components.filter((component) => !covered.has(component))).toEqual([]);
});

it('the chart names by default the newest release (appVersion) and the sidecars the e2e builds', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const spec = require(path.join(ROOT, 'scripts/image/spec.js')) as {
    driverSpec(): { ref: string };
    SIDECARS: { ref: string }[];
  };
  const images = renderChart(helm, ['--set', 'snapshots.enabled=true']).flatMap((o) => {
    const pod = (o as { spec?: { template?: { spec?: V1PodSpec } } }).spec?.template?.spec;
    return (pod?.containers ?? []).map((container) => container.image);
  });
  // A release build's image is tagged with the bare version; a dev build's with -dev.<commit>, which no chart names:
  // between releases the chart names the newest release (scripts/build-info.js, CHANGELOG.md).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const buildInfo = require(path.join(ROOT, 'scripts/build-info.js')) as { newestRelease(dir: string): string };
  const release = buildInfo.newestRelease(ROOT);
  const driver = spec.driverSpec().ref.replace(/:[^:]+$/, `:${release}`);
  expect([...new Set(images)].sort()).toEqual([driver, ...spec.SIDECARS.map((s) => s.ref)].sort());
});

describe("deploy/README.md's snippets", () => {
  const readmeDir = path.join(work, 'readme');
  fs.mkdirSync(readmeDir, { recursive: true });

  it("kubeletDir is the kustomize patch's eight changes in one setting", () => {
    const patch = (loadYaml(snippetAfterMarker('kubelet-dir-patch')) as { patches: KustomizePatch[] }).patches;
    const dir = '/var/snap/microk8s/common/var/lib/kubelet';
    const byKey = (objects: KubeObject[]) => new Map(normalise(objects).map((o) => [objectKey(o), o]));
    const chart = byKey(renderChart(helm, ['--set', `kubeletDir=${dir}`]));
    const kustomized = byKey(
      kustomizeObjects(kubectl, work, 'kubelet-dir', { components: ['components/temporal-mtls'], patches: patch }),
    );
    const key = 'DaemonSet/durable-csi/durable-csi-node';
    expect(JSON.stringify(chart.get(key))).toContain(dir);
    expect({ [key]: chart.get(key) }).toEqual({ [key]: kustomized.get(key) });
  });

  it('the Helm values of step 3 lint and render', () => {
    const values = path.join(readmeDir, 'my-values.yaml');
    fs.writeFileSync(values, snippetContaining('# my-values.yaml'));
    expect(execFileSync(helm, ['lint', '--strict', CHART, '-f', values], { encoding: 'utf8' })).toContain(
      '0 chart(s) failed',
    );
    const objects = renderChart(helm, ['-f', values]);
    const text = JSON.stringify(objects);
    expect(text).toContain('"image":"registry.example.com/durable-csi:0.2.0"');
    expect(text).toContain('--capacity=500Gi');
  });

  it('the kustomize overlay of step 3 renders with the image and Temporal it names', () => {
    const overlay = path.join(readmeDir, 'my-cluster');
    fs.mkdirSync(overlay, { recursive: true });
    const deploy = path.relative(overlay, path.join(ROOT, 'deploy'));
    fs.writeFileSync(
      path.join(overlay, 'kustomization.yaml'),
      snippetContaining('# my-cluster/kustomization.yaml').replaceAll('../deploy/', `${deploy}/`),
    );
    const text = JSON.stringify(parseAll(kubectl(['kustomize', overlay])));
    expect(text).toContain('"image":"registry.example.com/durable-csi:0.2.0"');
    expect(text).not.toContain('ghcr.io/durable-csi/durable-csi');
    expect(text).toContain('"TEMPORAL_ADDRESS":"ADDRESS"');
    expect(text).toContain('--capacity=500Gi');
  });
});

describe('mixes without a kustomize equivalent', () => {
  const render = (name: string) => {
    const mix = mixes.find((candidate) => candidate.name === name);
    if (!mix) throw new Error(`no mix ${name}`);
    return renderChart(helm, mix.valuesArgs);
  };
  const pods = (objects: KubeObject[]) =>
    objects.filter((o) => o.kind === 'DaemonSet' || o.kind === 'Deployment') as unknown as (KubeObject & {
      spec: { selector: { matchLabels: Record<string, string> }; template: { spec: V1PodSpec } };
    })[];
  type Monitor = KubeObject & { spec: { podMetricsEndpoints?: { port: string }[]; endpoints?: { port: string }[] } };

  it('mixed-nodes: a DaemonSet per node group, selectors apart, every kubelet path under kubeletDir', () => {
    const objects = render('mixed-nodes');
    const daemonSets = pods(objects).filter((o) => o.kind === 'DaemonSet');
    expect(daemonSets.map((d) => d.metadata.name)).toEqual(['durable-csi-node-dir', 'durable-csi-node-loop']);
    const [dir, loop] = daemonSets.map((d) => d.spec.template.spec);
    expect(daemonSets.map((d) => d.spec.selector.matchLabels['durable-csi.io/node-group'])).toEqual(['dir', 'loop']);
    expect(dir?.nodeSelector).toEqual({ 'example.com/local-disk': 'false', 'kubernetes.io/os': 'linux' });
    expect(loop?.containers[0]?.args).toContain('--backend=loop');
    expect(loop?.containers[0]?.args).toContain('--pool=/mnt/fast/durable-csi');
    expect(loop?.volumes?.map((v) => v.name)).toContain('dev');
    expect(dir?.volumes?.map((v) => v.name)).not.toContain('dev');
    expect(loop?.containers[0]?.resources?.limits?.memory).toBe('1Gi');
    expect(dir?.containers[0]?.resources?.limits?.memory).toBe('512Mi');
    const text = JSON.stringify(daemonSets);
    expect(text).not.toContain('/var/lib/kubelet');
    expect(text).toContain('--kubelet-dir=/var/lib/k0s/kubelet');
    expect(text).toContain('"path":"/var/lib/k0s/kubelet/plugins_registry"');
    // Temporal Cloud's mTLS: the system's roots, no CA file.
    expect(text).toContain('--temporal-tls-cert=');
    expect(text).not.toContain('--temporal-tls-ca');
    expect(objects.filter((o) => o.kind === 'StorageClass').map((o) => o.metadata.name)).toEqual([
      'local-dir',
      'local-fast-xfs',
    ]);
  });

  it('host-identity: the node plugin mounts its host directory, no node Secret', () => {
    const text = JSON.stringify(render('host-identity').filter((o) => o.kind === 'DaemonSet'));
    expect(text).toContain('"hostPath":{"path":"/etc/durable-csi/temporal","type":"Directory"}');
    expect(text).not.toContain('durable-csi-temporal-node-tls');
  });

  it('private-registry: digests, per-image registries, pull secrets, the cluster own priority classes', () => {
    const objects = render('private-registry');
    const specs = pods(objects).map((o) => o.spec.template.spec);
    const images = specs.flatMap((spec) => spec.containers.map((c) => c.image));
    expect(images).toContain(
      'registry.example.com/storage/durable-csi@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0',
    );
    expect(images).toContain('registry.example.com/mirror/csi-provisioner:v6.4.0');
    for (const spec of specs) expect(spec.imagePullSecrets).toEqual([{ name: 'registry-credentials' }]);
    expect(specs.map((spec) => spec.priorityClassName).sort()).toEqual(['platform-critical', 'platform-node-critical']);
    expect(objects.filter((o) => o.kind === 'PriorityClass')).toEqual([]);
    expect(objects.find((o) => o.kind === 'Namespace')?.metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe(
      'privileged',
    );
  });

  it('monitoring: PodMonitors for every metrics port, the alerts as they are in the rule file, the dashboard', () => {
    const objects = render('monitoring');
    const monitors = objects.filter((o) => o.kind === 'PodMonitor') as Monitor[];
    expect(monitors.map((m) => m.metadata.labels?.release)).toEqual(['monitoring', 'monitoring']);
    const ports = monitors.flatMap((m) => (m.spec.podMetricsEndpoints ?? []).map((e) => e.port)).sort();
    expect(ports).toEqual(['metrics', 'metrics', 'prov-http', 'resizer-http', 'snap-http']);
    const rule = objects.find((o) => o.kind === 'PrometheusRule') as KubeObject & { spec: unknown };
    expect(rule.spec).toEqual(loadYaml(fs.readFileSync(path.join(CHART, 'files/prometheus-rules.yaml'), 'utf8')));
    const dashboard = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'durable-csi-dashboard') as
      (KubeObject & { data: Record<string, string> }) | undefined;
    expect(dashboard?.metadata.labels?.grafana_dashboard).toBe('1');
    expect(JSON.parse(dashboard?.data['durable-csi.json'] ?? '{}')).toEqual(
      JSON.parse(fs.readFileSync(path.join(CHART, 'files/grafana-dashboard.json'), 'utf8')),
    );
  });

  it('service-monitor: a headless Service and a ServiceMonitor per Pod kind, on the same ports', () => {
    const objects = render('service-monitor');
    const services = objects.filter((o) => o.kind === 'Service') as (KubeObject & { spec: { clusterIP?: string } })[];
    expect(services.map((s) => [s.metadata.name, s.spec.clusterIP])).toEqual([
      ['durable-csi-controller-metrics', 'None'],
      ['durable-csi-node-metrics', 'None'],
    ]);
    const monitors = objects.filter((o) => o.kind === 'ServiceMonitor') as Monitor[];
    expect(monitors.map((m) => (m.spec.endpoints ?? []).map((e) => e.port))).toEqual([
      ['metrics', 'prov-http', 'resizer-http'],
      ['metrics'],
    ]);
  });

  it('a values mistake fails the render with what to set, not a broken manifest', () => {
    const fails = (args: string[]) => {
      try {
        renderChart(helm, args);
      } catch (error) {
        return String((error as { stderr?: string }).stderr ?? error);
      }
      throw new Error(`helm template ${args.join(' ')} rendered`);
    };
    expect(fails(['--set', 'temporal.identity.mode=tls'])).toContain(
      'temporal.identity.mode is "tls": mtls, apiKey or insecure',
    );
    expect(fails(['--set', 'node.groups[0].backend=lvm'])).toContain('backend is "lvm": dir or loop');
    expect(
      fails([
        '--set-json',
        'node.groups=[{"name":"","backend":"dir","pool":"/p","capacity":"1Gi"},{"name":"b","backend":"loop","pool":"/q","capacity":"1Gi"}]',
      ]),
    ).toContain('every group needs a name');
  });
});

describe('on a real API server', () => {
  let plane: ControlPlane;
  beforeAll(async () => {
    plane = new ControlPlane(tools, work, []);
    await plane.start(['namespace-controller']);
    const admin = plane.adminKubeconfig();
    kubectl(['--kubeconfig', admin, 'create', 'namespace', 'durable-csi']);
    // The snapshot and group snapshot CRDs, for the mixes with snapshots.enabled (the cluster's, not the chart's:
    // deploy/README.md).
    for (const [crd] of SNAPSHOT_CRDS) kubectl(['--kubeconfig', admin, 'apply', '--server-side', '-f', tools[crd]]);
  }, 120_000);
  afterAll(async () => {
    await plane?.stop();
  });

  it.each(mixes.map((mix) => [mix.name, mix] as const))('%s validates (server-side dry run)', (_name, mix) => {
    // The Prometheus Operator's kinds need its CRDs, which this cluster has not: checked by shape above.
    const objects = renderChart(helm, mix.valuesArgs).filter((o) => !o.apiVersion.startsWith('monitoring.coreos.com/'));
    const input = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects });
    kubectl(
      [
        '--kubeconfig',
        plane.adminKubeconfig(),
        'apply',
        '--server-side',
        '--dry-run=server',
        '--field-manager=helm',
        '-f',
        '-',
      ],
      input,
    );
  });
});
