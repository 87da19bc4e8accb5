import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { findFreePort } from '../../temporal-dev/free-port';
import { KubeRest } from './kube-rest';
import { startProcess, type Proc } from './processes';
import type { K8sTools } from './tools';
import { eventually } from '../support/eventually';

/** An identity the API server knows by a static token (--token-auth-file). */
export interface Identity {
  user: string;
  groups: string[];
}

export function serviceAccount(namespace: string, name: string): Identity {
  return {
    user: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
  };
}

const ADMIN: Identity = { user: 'e2e-admin', groups: ['system:masters'] };

/**
 * Where the control plane runs. By default on the test's loopback; the real node (test/e2e-node) runs it inside
 * its network namespace: `launch` wraps each command, the API server listens on `apiPort` at `bindAddress`, the
 * test reaches it through `restSocket`, and ServiceAccount tokens are issued (kubelet mounts them into Pods).
 */
export interface ControlPlaneNetwork {
  launch(command: string, args: string[]): [string, string[]];
  bindAddress: string;
  advertiseAddress: string;
  /** The address kubeconfigs name (default 127.0.0.1): one that kubelets in other namespaces reach too. */
  serverAddress?: string;
  apiPort: number;
  /** A unix socket forwarded to the API server, for the test process (outside the namespace). */
  restSocket: string;
  /** Extra kube-apiserver flags (e.g. how to dial kubelet). */
  apiServerArgs: string[];
  /** Extra kube-controller-manager flags (e.g. --root-ca-file, read only once the API server wrote its cert). */
  controllerManagerArgs: string[];
}

/**
 * etcd, kube-apiserver and kube-controller-manager as plain processes on loopback (brief: kubernetes.md).
 * Authentication is a static token file: one token per identity, ServiceAccounts included, so a process
 * "runs as" a ServiceAccount by using its kubeconfig and RBAC applies to it as in a cluster.
 */
export class ControlPlane {
  readonly processes: Proc[] = [];
  server = '';
  private tokens = new Map<string, string>();

  constructor(
    private readonly tools: K8sTools,
    readonly root: string,
    private readonly identities: Identity[],
    private readonly network?: ControlPlaneNetwork,
  ) {}

  /** The serving certificate and its CA, self-signed by the API server (kube-root-ca.crt for the Pods). */
  get certFile(): string {
    return path.join(this.root, 'control-plane', 'certs', 'apiserver.crt');
  }

  private start_(name: string, command: string, args: string[]): Proc {
    const [wrapped, wrappedArgs] = this.network ? this.network.launch(command, args) : [command, args];
    return startProcess(name, wrapped, wrappedArgs, { logDir: this.logDir });
  }

  get logDir(): string {
    return path.join(this.root, 'logs');
  }

  async start(kubeControllers: string[]): Promise<void> {
    const dir = path.join(this.root, 'control-plane');
    fs.mkdirSync(dir, { recursive: true });
    const [etcdClient, etcdPeer] = [await findFreePort(), await findFreePort()];
    const apiPort = this.network?.apiPort ?? (await findFreePort());
    this.processes.push(
      this.start_('etcd', this.tools.etcd, [
        `--data-dir=${path.join(dir, 'etcd')}`,
        `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
        `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
        '--unsafe-no-fsync',
        '--log-level=warn',
      ]),
    );
    const tokenFile = path.join(dir, 'tokens.csv');
    const lines = [ADMIN, ...this.identities].map((identity, index) => {
      const token = crypto.randomBytes(24).toString('hex');
      this.tokens.set(identity.user, token);
      return `${token},${identity.user},uid-${index},"${identity.groups.join(',')}"`;
    });
    fs.writeFileSync(tokenFile, `${lines.join('\n')}\n`, { mode: 0o600 });
    const { publicKey, privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    const saPub = path.join(dir, 'sa.pub');
    const saKey = path.join(dir, 'sa.key');
    fs.writeFileSync(saPub, publicKey.export({ type: 'spki', format: 'pem' }));
    fs.writeFileSync(saKey, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    this.server = `https://${this.network?.serverAddress ?? '127.0.0.1'}:${apiPort}`;
    this.processes.push(
      this.start_('kube-apiserver', this.tools['kube-apiserver'], [
        `--bind-address=${this.network?.bindAddress ?? '127.0.0.1'}`,
        `--advertise-address=${this.network?.advertiseAddress ?? '127.0.0.1'}`,
        `--secure-port=${apiPort}`,
        `--etcd-servers=http://127.0.0.1:${etcdClient}`,
        `--cert-dir=${path.join(dir, 'certs')}`,
        `--token-auth-file=${tokenFile}`,
        '--authorization-mode=RBAC',
        '--service-cluster-ip-range=10.0.0.0/24',
        '--service-account-issuer=https://kubernetes.default.svc',
        `--service-account-key-file=${saPub}`,
        `--service-account-signing-key-file=${saKey}`,
        '--endpoint-reconciler-type=none',
        // Without a kubelet nothing mounts ServiceAccount tokens; the real node needs them.
        ...(this.network ? [] : ['--disable-admission-plugins=ServiceAccount']),
        '--enable-priority-and-fairness=false',
        // The node DaemonSet's agent is privileged; the API server refuses such Pod templates otherwise.
        '--allow-privileged=true',
        ...(this.network?.apiServerArgs ?? []),
      ]),
    );
    await eventually('kube-apiserver /readyz', () => this.readyz(), 60_000, 500);
    const admin = this.writeKubeconfig(ADMIN.user, 'admin');
    this.processes.push(
      this.start_('kube-controller-manager', this.tools['kube-controller-manager'], [
        `--kubeconfig=${admin}`,
        '--leader-elect=false',
        '--secure-port=0',
        `--controllers=${kubeControllers.join(',')}`,
        ...(this.network?.controllerManagerArgs ?? []),
      ]),
    );
  }

  /** A kubeconfig file authenticating as the identity (the API server's self-signed certificate is not checked). */
  writeKubeconfig(user: string, fileName: string): string {
    const token = this.tokens.get(user);
    if (!token) throw new Error(`no token for ${user}`);
    const file = path.join(this.root, 'kubeconfigs', `${fileName}.yaml`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'e2e', cluster: { server: this.server, 'insecure-skip-tls-verify': true } }],
      users: [{ name: fileName, user: { token } }],
      contexts: [{ name: 'e2e', context: { cluster: 'e2e', user: fileName } }],
      'current-context': 'e2e',
    };
    // Written aside and renamed over: a process already started (a controller, kubectl) may be reading the file
    // when a later call writes it again, and a file truncated in place reads as "no configuration has been provided"
    // (seen under load: the snapshot-controller died of it).
    const aside = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(aside, JSON.stringify(config, null, 2), { mode: 0o600 });
    fs.renameSync(aside, file);
    return file;
  }

  adminKubeconfig(): string {
    return this.writeKubeconfig(ADMIN.user, 'admin');
  }

  /** A REST client authenticating as the identity (the admin when no user is given). */
  rest(user = ADMIN.user): KubeRest {
    const token = this.tokens.get(user);
    if (!token) throw new Error(`no token for ${user}`);
    return new KubeRest(this.server, token, this.network?.restSocket);
  }

  async stop(): Promise<void> {
    for (const proc of [...this.processes].reverse()) await proc.stop(5000);
  }

  private async readyz(): Promise<boolean> {
    const rest = this.rest();
    try {
      await rest.request('GET', '/readyz');
      return true;
    } finally {
      rest.close();
    }
  }
}
