import type { V1DaemonSet, V1Deployment, V1PersistentVolumeList } from '@kubernetes/client-node';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { locateTemporalCli } from '../../temporal-dev/locate-cli';
import { CHART, chartTools } from '../e2e-k8s/chart-render';
import { KubeError } from '../e2e-k8s/kube-rest';
import { temporalAddress } from '../support/cluster';
import { DRIVER, NAMESPACE, controllerDeployment, deployedNode, driverReady, nodeDaemonSet } from './deployed-node';
import { imageRef, type ImageTars } from './images';
import { NODE_TEMPORAL_ADDRESS, type RealNode } from './real-node';
import { eventually } from '../support/eventually';

/**
 * issue 36 items 1 and 6: the chart on a real kubelet. `helm install` as deploy/README.md says (a values file; here
 * the test's plaintext Temporal and a pool without project quotas, as on every test node), a claim mounted by a Pod,
 * `helm upgrade` with a changed value rolling both the controller and the node plugin while that Pod keeps its data,
 * and the uninstall guide followed to the end: claims deleted, nothing stuck or orphaned (the CLI in the controller's
 * image, through kubectl exec), `helm uninstall`, the pool empty, the node's record ended in Temporal.
 */
jest.setTimeout(300_000);

const NODE = 'dcsi-chart';
const RELEASE = 'durable-csi';
const { helm } = chartTools();
const execFileAsync = promisify(execFile);

/**
 * helm inside the node's namespace, as the cluster's admin. Asynchronously: the Pods reach the test's Temporal through
 * a forwarder in this process, which a synchronous call would stall.
 */
async function helmOn(node: RealNode, args: string[]): Promise<string> {
  const [command, wrapped] = node.ns.launch(helm, [...args, `--kubeconfig=${node.plane.adminKubeconfig()}`]);
  try {
    return (await execFileAsync(command, wrapped, { encoding: 'utf8', timeout: 180_000 })).stdout;
  } catch (error) {
    throw new Error(`helm ${args.join(' ')} failed: ${(error as { stderr?: string }).stderr ?? String(error)}`);
  }
}

/** The values file of the install: the images built here, the test's Temporal, what a test node needs. */
function writeValues(node: RealNode, images: ImageTars): string {
  const image = (name: string) => {
    const ref = imageRef(images, name);
    const [registry, ...rest] = ref.slice(0, ref.lastIndexOf(':')).split('/');
    return { registry, repository: rest.join('/'), tag: ref.slice(ref.lastIndexOf(':') + 1) };
  };
  const values = {
    image: {
      driver: image('durable-csi'),
      csiProvisioner: image('csi-provisioner'),
      csiResizer: image('csi-resizer'),
      csiSnapshotter: image('csi-snapshotter'),
    },
    temporal: { address: NODE_TEMPORAL_ADDRESS, identity: { mode: 'insecure' } },
    node: {
      groups: [{ name: '', backend: 'dir', pool: '/var/lib/durable-csi/pool', capacity: '100Gi', dirQuota: 'none' }],
    },
    snapshots: { enabled: true },
  };
  const file = path.join(node.run, 'my-values.yaml');
  fs.writeFileSync(file, JSON.stringify(values, null, 2));
  return file;
}

let valuesFile = '';
const real = deployedNode(NODE, [], undefined, 'node', async (node, images) => {
  valuesFile = writeValues(node, images);
  await helmOn(node, ['install', RELEASE, CHART, '--namespace', NAMESPACE, '--create-namespace', '-f', valuesFile]);
});

/**
 * `durable-csi ARGS --output json` in the controller's container, as the uninstall guide runs it. Asynchronously: the
 * Pods reach the test's Temporal through a forwarder in this process, which a synchronous exec would stall.
 */
async function cli<T>(node: RealNode, args: string[]): Promise<T> {
  const exec = ['exec', '-n', NAMESPACE, 'deploy/durable-csi-controller', '-c', 'durable-csi', '--'];
  const [command, wrapped] = node.ns.launch(node.tools.kubectl, [
    `--kubeconfig=${node.plane.adminKubeconfig()}`,
    ...exec,
    'durable-csi',
    ...args,
    '--output',
    'json',
  ]);
  const { stdout } = await execFileAsync(command, wrapped, { encoding: 'utf8', timeout: 60_000 });
  return JSON.parse(stdout) as T;
}

test('helm install: every Pod Ready, the release deployed, the chart own labels and priority classes', async () => {
  const { node } = real;
  expect(await helmOn(node, ['status', RELEASE, '-n', NAMESPACE])).toMatch(/STATUS: deployed/);
  const deployment = await controllerDeployment(node);
  expect(deployment.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('Helm');
  expect(deployment.spec?.template.spec?.priorityClassName).toBe('durable-csi-controller-critical');
  expect((await nodeDaemonSet(node)).spec?.template.spec?.priorityClassName).toBe('durable-csi-node-critical');
});

test('helm upgrade with a changed value rolls the controller and the node plugin; a mounted volume keeps its data', async () => {
  const { node, work } = real;
  await work.claim('chart-1', 'durable-csi-dir');
  await work.pod('chart-1', 'chart-1', { script: 'echo before-upgrade > /data/file' });
  await work.waitRunning('chart-1');
  const before = { deployment: await controllerDeployment(node), daemonSet: await nodeDaemonSet(node) };
  await helmOn(node, [
    'upgrade',
    RELEASE,
    CHART,
    '--namespace',
    NAMESPACE,
    '-f',
    valuesFile,
    '--set',
    'node.groups[0].capacity=200Gi',
    '--set',
    'controller.podAnnotations.example\\.com/upgraded=yes',
  ]);
  await driverReady(node);
  const after: { deployment: V1Deployment; daemonSet: V1DaemonSet } = {
    deployment: await controllerDeployment(node),
    daemonSet: await nodeDaemonSet(node),
  };
  expect(after.deployment.metadata?.generation).toBeGreaterThan(before.deployment.metadata?.generation ?? 0);
  expect(after.daemonSet.metadata?.generation).toBeGreaterThan(before.daemonSet.metadata?.generation ?? 0);
  expect(after.daemonSet.spec?.template.spec?.containers[0]?.args).toContain('--capacity=200Gi');
  expect(await helmOn(node, ['history', RELEASE, '-n', NAMESPACE, '-o', 'json'])).toMatch(/"revision":2/);
  // The Pod was never moved: its volume stayed mounted through the node plugin's restart.
  expect(work.exec('chart-1', 'cat /data/file')).toBe('before-upgrade\n');
  // And the upgraded driver provisions.
  await work.claim('chart-2', 'durable-csi-dir');
  await work.pod('chart-2', 'chart-2', { script: 'echo after-upgrade > /data/file' });
  await work.waitRunning('chart-2');
  expect(work.exec('chart-2', 'cat /data/file')).toBe('after-upgrade\n');
});

test('the uninstall guide, followed: no volume, operation, record or object of the driver is left', async () => {
  const { node, work } = real;
  await work.claim('chart-3', 'durable-csi-dir');
  await work.pod('chart-3', 'chart-3', { script: 'echo data > /data/file' });
  await work.waitRunning('chart-3');
  expect(fs.readdirSync(path.join(node.poolDir, 'volumes'))).toHaveLength(1);
  // 1. Delete the claims; their PVs go.
  await work.deletePod('chart-3');
  await work.deleteClaim('chart-3');
  await eventually(
    'no PV of the driver',
    async () => {
      const pvs = await node.api.get<V1PersistentVolumeList>('/api/v1/persistentvolumes');
      return pvs.items.every((pv) => pv.spec?.csi?.driver !== DRIVER);
    },
    120_000,
  );
  // 2. Nothing pending, nothing orphaned: the CLI of the controller's image.
  await eventually(
    'volumes stuck empty',
    async () => (await cli<{ operations: unknown[] }>(node, ['volumes', 'stuck'])).operations.length === 0,
    60_000,
  );
  const orphans = await cli<Record<string, unknown[] | boolean>>(node, ['volumes', 'orphans']);
  // The test Temporal is shared: the records of the real nodes of suites before this one (ended with their nodes,
  // never uninstalled) are unchecked nodes of the same driver name. Only this node's concerns this uninstall.
  const others = (value: unknown) => typeof value === 'string' && value !== NODE;
  if (Array.isArray(orphans.uncheckedNodes)) orphans.uncheckedNodes = orphans.uncheckedNodes.filter((n) => !others(n));
  const found = Object.entries(orphans).filter(([, value]) => Array.isArray(value) && value.length > 0);
  expect(found).toEqual([]);
  // 3. Remove the driver: its cluster-wide objects go with it.
  await helmOn(node, ['uninstall', RELEASE, '-n', NAMESPACE, '--wait', '--timeout', '120s']);
  for (const gone of [
    `/apis/storage.k8s.io/v1/csidrivers/${DRIVER}`,
    '/apis/storage.k8s.io/v1/storageclasses/durable-csi-dir',
    '/apis/scheduling.k8s.io/v1/priorityclasses/durable-csi-node-critical',
    `/apis/apps/v1/namespaces/${NAMESPACE}/daemonsets/durable-csi-node`,
  ])
    await expect(node.api.get(gone)).rejects.toBeInstanceOf(KubeError);
  // 4. The pool holds no volume; wiping it loses nothing.
  expect(fs.readdirSync(path.join(node.poolDir, 'volumes'))).toEqual([]);
  // 5. End the node's record (the guide's query, narrowed to this test's node: the test Temporal is shared).
  const temporal = await locateTemporalCli();
  const query = `WorkflowType = "nodePresence" AND TaskQueue = "${DRIVER}/control" AND WorkflowId = "${DRIVER}/node-record/${NODE}"`;
  execFileSync(temporal, [
    'workflow',
    'terminate',
    '--address',
    temporalAddress(),
    '--namespace',
    'default',
    '--reason',
    'durable-csi uninstalled',
    '--yes',
    '--query',
    query,
  ]);
  await eventually(
    'the node record ended',
    async () => {
      const out = execFileSync(
        temporal,
        [
          'workflow',
          'count',
          '-o',
          'json',
          '--address',
          temporalAddress(),
          '--query',
          `${query} AND ExecutionStatus = "Running"`,
        ],
        { encoding: 'utf8' },
      );
      // Proto JSON leaves a zero count out.
      return Number((JSON.parse(out) as { count?: string }).count ?? 0) === 0;
    },
    30_000,
  );
});
