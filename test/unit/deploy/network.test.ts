/**
 * issue 21 items 8 and 10, in the manifests: every listener of the driver's Pods is bound to the Pod's IP (not every
 * interface), a NetworkPolicy admits only the metrics ports from a namespace labeled for scraping and lets the Pods
 * out only to Temporal and DNS (and the controller to the API server), the dev Temporal admits only the driver's
 * Pods, and a PodDisruptionBudget keeps a controller replica through drains. Whether the API server accepts them is
 * test/e2e-k8s's (it applies deploy/ server-side).
 */
import type {
  V1Container,
  V1DaemonSet,
  V1Deployment,
  V1NetworkPolicy,
  V1PodDisruptionBudget,
} from '@kubernetes/client-node';
import { loadAll as loadAllYaml } from 'js-yaml';
import fs from 'node:fs';
import path from 'node:path';
import { DEPLOY, withComponent } from './components';

const load = <T>(file: string) => loadAllYaml(fs.readFileSync(path.join(DEPLOY, file), 'utf8')) as T[];
type Workload = V1Deployment | V1DaemonSet;
const [controller] = load<V1Deployment>('base/controller.yaml');
const [node] = load<V1DaemonSet>('base/node.yaml');
const policies = load<V1NetworkPolicy>('base/networkpolicy.yaml');
const policy = (name: string) => {
  const found = policies.find((candidate) => candidate.metadata?.name === name);
  if (!found) throw new Error(`networkpolicy.yaml has no ${name}`);
  return found;
};
// deploy/components/snapshots adds a sidecar with a metrics port to the controller, and that port to the ingress.
const snapshotsController = controller && withComponent(controller, 'snapshots');
const snapshotsIngress = withComponent(policy('durable-csi-ingress'), 'snapshots');
const containers = (workload: Workload | undefined): V1Container[] => workload?.spec?.template.spec?.containers ?? [];
const LISTEN_FLAGS = /^--(metrics-address|health-address|http-endpoint)=(.*)$/;

describe.each([
  ['controller', controller, policy('durable-csi-ingress')],
  ['node', node, policy('durable-csi-ingress')],
  ['controller with components/snapshots', snapshotsController, snapshotsIngress],
])('%s listeners', (_name, workload, ingress) => {
  const listeners = containers(workload).flatMap((container) => {
    const args = container.args ?? [];
    // The node-to-node copies' listener is two flags: its port and its address.
    const transferPort = args.find((arg) => arg.startsWith('--transfer-port='))?.split('=')[1];
    const transferHost = args.find((arg) => arg.startsWith('--transfer-address='))?.split('=')[1];
    const transfer = transferPort ? [{ container, address: `${transferHost ?? ''}:${transferPort}` }] : [];
    return [
      ...args.flatMap((arg) => {
        const match = LISTEN_FLAGS.exec(arg);
        return match ? [{ container, address: match[2] ?? '' }] : [];
      }),
      ...transfer,
    ];
  });

  it('every declared port has a listener, bound to $(POD_IP) from the Downward API', () => {
    const declared = containers(workload).flatMap((container) => (container.ports ?? []).map((p) => p.containerPort));
    expect(listeners.map(({ address }) => Number(address.split(':').pop())).sort()).toEqual(declared.sort());
    for (const { container, address } of listeners) {
      expect(address).toMatch(/^\$\(POD_IP\):\d+$/);
      const podIp = container.env?.find((variable) => variable.name === 'POD_IP');
      expect(podIp?.valueFrom?.fieldRef?.fieldPath).toBe('status.podIP');
    }
  });

  it('ingress admits its metrics ports only, never a probe port (probes come from the node)', () => {
    expect(ingress.spec?.podSelector?.matchLabels).toEqual({ 'app.kubernetes.io/name': 'durable-csi' });
    const admitted = new Set((ingress.spec?.ingress ?? []).flatMap((rule) => (rule.ports ?? []).map((p) => p.port)));
    // The transfer port: from other node agents only (durable-csi-node-transfers, below).
    for (const container of containers(workload))
      for (const port of container.ports ?? [])
        expect(admitted.has(port.containerPort)).toBe(port.name !== 'healthz' && port.name !== 'transfer');
  });
});

describe('components/snapshots on the network', () => {
  it('adds the sidecar and its port and nothing else: the base stays as it is for clusters without snapshots', () => {
    expect(containers(snapshotsController).map((c) => c.name)).toEqual([
      ...containers(controller).map((c) => c.name),
      'csi-snapshotter',
    ]);
    const ports = (p: V1NetworkPolicy) =>
      (p.spec?.ingress ?? []).flatMap((rule) => (rule.ports ?? []).map((x) => x.port));
    expect(ports(snapshotsIngress)).toEqual([...ports(policy('durable-csi-ingress')), 8082]);
    expect(containers(controller).map((c) => c.name)).not.toContain('csi-snapshotter');
    expect(ports(policy('durable-csi-ingress'))).not.toContain(8082);
  });
});

describe('NetworkPolicies', () => {
  it('ingress comes only from a namespace labeled for scraping', () => {
    // As YAML says it (the client's model calls the field `_from`).
    const rules = (policy('durable-csi-ingress').spec?.ingress ?? []) as { from?: unknown[] }[];
    const sources = rules.flatMap((rule) => rule.from ?? []);
    expect(sources).toEqual([{ namespaceSelector: { matchLabels: { 'durable-csi.io/scrape': 'true' } } }]);
  });

  it('egress: Temporal and DNS for every driver Pod, the API server for the controller alone', () => {
    const ports = (name: string) =>
      (policy(name).spec?.egress ?? []).flatMap((rule) => (rule.ports ?? []).map((p) => `${p.protocol}/${p.port}`));
    expect(policy('durable-csi-egress').spec?.policyTypes).toEqual(['Egress']);
    expect(ports('durable-csi-egress').sort()).toEqual(['TCP/53', 'TCP/7233', 'UDP/53']);
    expect(policy('durable-csi-controller-egress').spec?.podSelector?.matchLabels).toMatchObject({
      'app.kubernetes.io/component': 'controller',
    });
    expect(ports('durable-csi-controller-egress').sort()).toEqual(['TCP/443', 'TCP/6443']);
  });

  it("the dev Temporal's frontend admits the driver's Pods only, on 7233, and it connects nowhere", () => {
    const devPolicy = load<V1NetworkPolicy & { kind: string }>('overlays/dev-temporal/temporal-dev.yaml').find(
      (object) => object.kind === 'NetworkPolicy',
    );
    expect(devPolicy?.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(devPolicy?.spec?.egress ?? []).toEqual([]);
    expect(devPolicy?.spec?.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'durable-csi' } } }],
        ports: [{ protocol: 'TCP', port: 7233 }],
      },
    ]);
  });
});

describe("nodes' node-to-node copies (dir and loop alike, docs/volume-moves.md)", () => {
  const loopNode = node && withComponent(node, 'loop-backend');

  it('listen on $(POD_IP):9470, a declared port that only other node agents may reach, and only reach those', () => {
    for (const daemonSet of [node, loopNode]) {
      const agent = containers(daemonSet).find((container) => container.name === 'durable-csi');
      expect(agent?.args).toEqual(expect.arrayContaining(['--transfer-port=9470', '--transfer-address=$(POD_IP)']));
      expect(agent?.args?.filter((arg) => arg.startsWith('--transfer-'))).toHaveLength(2);
      expect(agent?.ports).toContainEqual({ name: 'transfer', containerPort: 9470 });
    }
    const ingressPorts = (policy('durable-csi-ingress').spec?.ingress ?? []).flatMap((rule) => rule.ports ?? []);
    expect(ingressPorts.map((p) => p.port)).not.toContain(9470);
    const transfers = policy('durable-csi-node-transfers');
    const nodes = {
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'durable-csi', 'app.kubernetes.io/component': 'node' } },
    };
    expect(transfers.spec?.podSelector).toEqual(nodes.podSelector);
    expect(transfers.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    const onlyTransfers = [{ protocol: 'TCP', port: 9470 }];
    expect(transfers.spec?.ingress).toEqual([{ from: [nodes], ports: onlyTransfers }]);
    expect(transfers.spec?.egress).toEqual([{ to: [nodes], ports: onlyTransfers }]);
  });
});

describe('the controller through disruptions', () => {
  it('a PodDisruptionBudget evicts at most one of its replicas at a time', () => {
    const [budget] = load<V1PodDisruptionBudget>('base/controller-pdb.yaml');
    expect(budget?.spec?.selector?.matchLabels).toEqual(controller?.spec?.selector.matchLabels);
    expect(budget?.spec?.maxUnavailable).toBe(1);
    expect(controller?.spec?.replicas ?? 1).toBeGreaterThan(1);
    const kustomization = fs.readFileSync(path.join(DEPLOY, 'base/kustomization.yaml'), 'utf8');
    expect(kustomization).toContain('controller-pdb.yaml');
    expect(kustomization).toContain('networkpolicy.yaml');
  });
});

describe("the node agent's host access", () => {
  const mounts = containers(node).find((container) => container.name === 'durable-csi')?.volumeMounts ?? [];

  it('mounts Bidirectional only kubelet pods/ and plugins/kubernetes.io/csi/, not all of /var/lib/kubelet', () => {
    const bidirectional = mounts.filter((mount) => mount.mountPropagation === 'Bidirectional').map((m) => m.mountPath);
    expect(bidirectional.sort()).toEqual(['/var/lib/kubelet/plugins/kubernetes.io/csi', '/var/lib/kubelet/pods']);
    expect(mounts.map((mount) => mount.mountPath)).not.toContain('/var/lib/kubelet');
  });

  it('has no /dev of the host unless the loop backend asks for it', () => {
    expect(mounts.map((mount) => mount.mountPath)).not.toContain('/dev');
    const loop = fs.readFileSync(path.join(DEPLOY, 'components/loop-backend/kustomization.yaml'), 'utf8');
    expect(loop).toContain('mountPath: /dev');
  });
});
