/**
 * issue 21 items 1 and 3, in the manifests: the driver's containers take only named keys of the Temporal ConfigMap
 * (an envFrom would turn any key a ConfigMap writer adds, NODE_OPTIONS say, into the environment of a root
 * process), deploy/base asks for no plaintext, and only the shipped temporal-insecure component (which the
 * dev-Temporal overlay uses) says TEMPORAL_INSECURE=true.
 */
import type { V1ConfigMap, V1Container, V1DaemonSet, V1Deployment } from '@kubernetes/client-node';
// js-yaml is what @kubernetes/client-node parses with; its own entry point is ESM, which jest cannot load here.
import { loadAll as loadAllYaml } from 'js-yaml';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../../common/project-root';

const DEPLOY = path.join(findProjectRoot(), 'deploy');
const read = (file: string) => fs.readFileSync(path.join(DEPLOY, file), 'utf8');

function driverContainer(file: string): V1Container {
  const [workload] = loadAllYaml(read(file)) as (V1Deployment | V1DaemonSet)[];
  const container = workload?.spec?.template.spec?.containers.find((candidate) => candidate.name === 'durable-csi');
  if (!container) throw new Error(`${file} has no durable-csi container`);
  return container;
}

describe.each(['base/controller.yaml', 'base/node.yaml'])('%s', (file) => {
  const container = driverContainer(file);

  it('reads no ConfigMap whole (no envFrom)', () => {
    expect(container.envFrom).toBeUndefined();
  });

  it('takes TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE by name, TEMPORAL_INSECURE only if present', () => {
    const fromConfigMap = (container.env ?? [])
      .filter((variable) => variable.valueFrom?.configMapKeyRef)
      .map((variable) => ({
        name: variable.name,
        configMap: variable.valueFrom?.configMapKeyRef?.name,
        key: variable.valueFrom?.configMapKeyRef?.key,
        optional: variable.valueFrom?.configMapKeyRef?.optional ?? false,
      }));
    expect(fromConfigMap).toEqual([
      { name: 'TEMPORAL_ADDRESS', configMap: 'durable-csi-temporal', key: 'TEMPORAL_ADDRESS', optional: false },
      { name: 'TEMPORAL_NAMESPACE', configMap: 'durable-csi-temporal', key: 'TEMPORAL_NAMESPACE', optional: false },
      { name: 'TEMPORAL_INSECURE', configMap: 'durable-csi-temporal', key: 'TEMPORAL_INSECURE', optional: true },
    ]);
  });
});

it('deploy/base refuses plaintext; components/temporal-insecure, used by overlays/dev-temporal, accepts it', () => {
  const [configMap] = loadAllYaml(read('base/temporal-config.yaml')) as V1ConfigMap[];
  expect(Object.keys(configMap?.data ?? {}).sort()).toEqual(['TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE']);
  const component = read('components/temporal-insecure/kustomization.yaml');
  expect(component).toMatch(/path: \/data\/TEMPORAL_INSECURE\s+value: 'true'/);
  const overlay = loadAllYaml(read('overlays/dev-temporal/kustomization.yaml'))[0] as { components?: string[] };
  expect(overlay.components).toContain('../../components/temporal-insecure');
});

it('the node agent confines paths to the kubelet directory whose parts it mounts', () => {
  const container = driverContainer('base/node.yaml');
  const kubeletDir = (container.args ?? []).find((arg) => arg.startsWith('--kubelet-dir='))?.split('=')[1];
  const kubeletMounts = (container.volumeMounts ?? []).filter((mount) => mount.name.startsWith('kubelet-'));
  expect(kubeletMounts.length).toBeGreaterThan(0);
  for (const mount of kubeletMounts) expect(mount.mountPath.startsWith(`${kubeletDir}/`)).toBe(true);
});
