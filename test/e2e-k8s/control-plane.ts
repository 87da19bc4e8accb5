import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { findFreePort } from '../../temporal-dev/free-port';
import { KubeRest } from './kube-rest';
import { eventually, startProcess, type Proc } from './processes';
import type { K8sTools } from './tools';

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
  ) {}

  get logDir(): string {
    return path.join(this.root, 'logs');
  }

  async start(kubeControllers: string[]): Promise<void> {
    const dir = path.join(this.root, 'control-plane');
    fs.mkdirSync(dir, { recursive: true });
    const [etcdClient, etcdPeer, apiPort] = [await findFreePort(), await findFreePort(), await findFreePort()];
    this.processes.push(
      startProcess(
        'etcd',
        this.tools.etcd,
        [
          `--data-dir=${path.join(dir, 'etcd')}`,
          `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
          `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
          `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
          `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
          '--unsafe-no-fsync',
          '--log-level=warn',
        ],
        { logDir: this.logDir },
      ),
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
    this.server = `https://127.0.0.1:${apiPort}`;
    this.processes.push(
      startProcess(
        'kube-apiserver',
        this.tools['kube-apiserver'],
        [
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
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
          '--disable-admission-plugins=ServiceAccount',
          '--enable-priority-and-fairness=false',
          // The node DaemonSet's agent is privileged; the API server refuses such Pod templates otherwise.
          '--allow-privileged=true',
        ],
        { logDir: this.logDir },
      ),
    );
    await eventually('kube-apiserver /readyz', () => this.readyz(), 60_000, 500);
    const admin = this.writeKubeconfig(ADMIN.user, 'admin');
    this.processes.push(
      startProcess(
        'kube-controller-manager',
        this.tools['kube-controller-manager'],
        [
          `--kubeconfig=${admin}`,
          '--leader-elect=false',
          '--secure-port=0',
          `--controllers=${kubeControllers.join(',')}`,
        ],
        { logDir: this.logDir },
      ),
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
    fs.writeFileSync(file, JSON.stringify(config, null, 2), { mode: 0o600 });
    return file;
  }

  adminKubeconfig(): string {
    return this.writeKubeconfig(ADMIN.user, 'admin');
  }

  /** A REST client authenticating as the identity (the admin when no user is given). */
  rest(user = ADMIN.user): KubeRest {
    const token = this.tokens.get(user);
    if (!token) throw new Error(`no token for ${user}`);
    return new KubeRest(this.server, token);
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
