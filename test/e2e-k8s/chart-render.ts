import { dump as dumpYaml, loadAll as loadAllYaml } from 'js-yaml';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../common/project-root';

const ROOT = findProjectRoot();
export const CHART = path.join(ROOT, 'deploy/chart');

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/**
 * A documented values mix: the chart's defaults, or a deploy/chart/ci/<name>-values.yaml. Its first line says what it
 * is in kustomize terms: `# kustomize: components/a, components/b` (deploy/base with those renders the same) or
 * `# kustomize: none (why)`.
 */
export interface ValuesMix {
  name: string;
  file?: string;
  valuesArgs: string[];
  kustomize?: string[];
  noKustomizeBecause?: string;
}

/** The defaults are deploy/base with components/temporal-mtls (the recommended identity is the default). */
export function chartMixes(): ValuesMix[] {
  const dir = path.join(CHART, 'ci');
  const files = fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('-values.yaml'))
    .sort();
  return [
    { name: 'defaults', valuesArgs: [], kustomize: ['components/temporal-mtls'] },
    ...files.map((name) => {
      const file = path.join(dir, name);
      const first = fs.readFileSync(file, 'utf8').split('\n')[0] ?? '';
      const said = /^# kustomize: (.*)$/.exec(first)?.[1];
      if (said === undefined) throw new Error(`${file}: the first line must be "# kustomize: ..."`);
      const none = /^none \((.+)\)$/.exec(said);
      return {
        name: name.replace(/-values\.yaml$/, ''),
        file,
        valuesArgs: ['-f', file],
        ...(none ? { noKustomizeBecause: none[1] } : { kustomize: said.split(',').map((part) => part.trim()) }),
      };
    }),
  ];
}

/** helm and promtool, as scripts/install-chart-tools.js built them; a missing one fails with the command. */
export function chartTools(): { helm: string; promtool: string } {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const installer = require(path.join(ROOT, 'scripts', 'install-chart-tools.js')) as {
    binaries(): { helm: string; promtool: string };
  };
  const binaries = installer.binaries();
  const missing = Object.entries(binaries).filter(([, file]) => !fs.existsSync(file));
  if (missing.length > 0)
    throw new Error(
      `chart tools missing: ${missing.map(([name, file]) => `${name} (${file})`).join(', ')}.\n` +
        'Build them (cached by version afterwards): node scripts/install-chart-tools.js',
    );
  return binaries;
}

export function parseAll(text: string): KubeObject[] {
  return (loadAllYaml(text) as (KubeObject | null)[]).filter((object): object is KubeObject => !!object);
}

/** `helm template durable-csi deploy/chart -n durable-csi <args>`, parsed. */
export function renderChart(helm: string, args: string[], release = 'durable-csi'): KubeObject[] {
  const text = execFileSync(helm, ['template', release, CHART, '--namespace', 'durable-csi', ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return parseAll(text);
}

export interface KustomizePatch {
  target: { kind: string; name: string };
  patch: string;
}

/**
 * `kubectl kustomize` of an overlay written under `work`: deploy/base with the components, the Temporal address and
 * namespace as deploy/README.md's step 3 sets them, and more patches if given.
 */
export function kustomizeObjects(
  kubectl: (args: string[]) => string,
  work: string,
  name: string,
  options: { components?: string[]; temporal?: { address: string; namespace: string }; patches?: KustomizePatch[] },
): KubeObject[] {
  const dir = path.join(work, `kustomize-${name}`);
  fs.mkdirSync(dir, { recursive: true });
  const rel = (sub: string) => path.relative(dir, path.join(ROOT, 'deploy', sub));
  const { components = [], temporal, patches = [] } = options;
  const temporalPatch: KustomizePatch[] = temporal
    ? [
        {
          target: { kind: 'ConfigMap', name: 'durable-csi-temporal' },
          patch: dumpYaml([
            { op: 'replace', path: '/data/TEMPORAL_ADDRESS', value: temporal.address },
            { op: 'replace', path: '/data/TEMPORAL_NAMESPACE', value: temporal.namespace },
          ]),
        },
      ]
    : [];
  const kustomization = {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: [rel('base')],
    ...(components.length ? { components: components.map(rel) } : {}),
    ...(temporalPatch.length + patches.length ? { patches: [...temporalPatch, ...patches] } : {}),
  };
  fs.writeFileSync(path.join(dir, 'kustomization.yaml'), dumpYaml(kustomization));
  return parseAll(kubectl(['kustomize', dir]));
}

/** Labels Helm (and the chart for Helm's sake) adds to every object; kustomize has none of them. */
const HELM_LABELS = [
  'app.kubernetes.io/managed-by',
  'app.kubernetes.io/instance',
  'app.kubernetes.io/version',
  'helm.sh/chart',
];

/**
 * What is compared: every object but the Namespace (the release's, made by `helm install --create-namespace`), less
 * Helm's labels. Flags are compared as sets after the subcommand, and volumes and mounts by name: kustomize
 * components append in the order an overlay lists them, which says nothing.
 */
export function normalise(objects: KubeObject[]): KubeObject[] {
  return objects
    .filter((object) => object.kind !== 'Namespace')
    .map((object) => {
      const copy = structuredClone(object);
      for (const label of HELM_LABELS) delete copy.metadata.labels?.[label];
      const pod = (copy.spec as { template?: { spec?: PodSpecLike } } | undefined)?.template?.spec;
      if (pod) sortPod(pod);
      return copy;
    });
}

interface PodSpecLike {
  containers?: { args?: string[]; volumeMounts?: { name: string }[] }[];
  volumes?: { name: string }[];
}

function sortPod(pod: PodSpecLike): void {
  const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
  pod.volumes?.sort(byName);
  for (const container of pod.containers ?? []) {
    container.volumeMounts?.sort(byName);
    if (container.args && container.args.length > 1) {
      const [first, ...rest] = container.args;
      container.args = first?.startsWith('-') ? [...container.args].sort() : [first!, ...rest.sort()];
    }
  }
}

export function objectKey(object: KubeObject): string {
  return `${object.kind}/${object.metadata.namespace ?? ''}/${object.metadata.name}`;
}
