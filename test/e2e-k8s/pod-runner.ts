import type { V1Container, V1PodSpec } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import { CLI_MAIN } from '../../agent/spawn-cli';
import { findFreePort } from '../../temporal-dev/free-port';
import { startProcess, type Proc } from './processes';
import type { K8sTools } from './tools';

/**
 * Runs a Pod template's containers as local processes, the way kubelet would start them, with exactly the
 * command and arguments the manifest gives (that is the point: manifests cannot drift from the code). What a
 * Pod would get from its node is emulated and nothing else:
 * - volumes: an emptyDir is a directory per Pod, a hostPath a directory per node; container paths in
 *   arguments are rewritten to those directories through the container's volumeMounts;
 * - the network namespace: every declared containerPort gets a free host port, rewritten in arguments;
 * - environment: env and envFrom resolved from the rendered ConfigMaps and the Downward API, then $(VAR)
 *   expanded as kubelet does; the Temporal address is the test's (no cluster DNS here);
 * - the ServiceAccount token: sidecars get --kubeconfig, durable-csi gets KUBECONFIG, for a kubeconfig that
 *   authenticates as the Pod's ServiceAccount (a static token the API server maps to it).
 */
export interface PodContext {
  podName: string;
  namespace: string;
  nodeName?: string;
  root: string;
  tools: K8sTools;
  configMaps: Map<string, Record<string, string>>;
  /** Environment the cluster would have given differently (the Temporal address). */
  envOverrides: Record<string, string>;
  /** A kubeconfig for the Pod's ServiceAccount; absent when the Pod mounts no token. */
  kubeconfig?: string;
}

export interface PodRun {
  ports: Map<number, number>;
  /** Host directory of a volume by name. */
  volumes: Map<string, string>;
  /** Container name -> its launch (command, args, env): what the test starts. */
  launches: Map<string, Launch>;
}

export interface Launch {
  container: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

export async function preparePod(spec: V1PodSpec, ctx: PodContext): Promise<PodRun> {
  const volumes = new Map<string, string>();
  for (const volume of spec.volumes ?? []) {
    let dir: string;
    if (volume.emptyDir) dir = path.join(ctx.root, 'pods', ctx.podName, volume.name);
    else if (volume.hostPath) dir = path.join(ctx.root, 'hosts', ctx.nodeName ?? 'none', volume.hostPath.path);
    else if (volume.secret || volume.configMap) continue;
    else throw new Error(`volume ${volume.name}: only emptyDir and hostPath are emulated`);
    fs.mkdirSync(dir, { recursive: true });
    volumes.set(volume.name, dir);
  }
  const ports = new Map<number, number>();
  for (const container of spec.containers)
    for (const port of container.ports ?? []) ports.set(port.containerPort, await findFreePort());
  const launches = new Map<string, Launch>();
  for (const container of spec.containers) {
    launches.set(container.name, launch(container, ctx, volumes, ports));
  }
  return { ports, volumes, launches };
}

function launch(container: V1Container, ctx: PodContext, volumes: Map<string, string>, ports: Map<number, number>) {
  const env = containerEnv(container, ctx);
  const mounts = (container.volumeMounts ?? [])
    .filter((mount) => volumes.has(mount.name))
    .map((mount) => ({ from: mount.mountPath, to: volumes.get(mount.name) ?? '' }))
    .sort((a, b) => b.from.length - a.from.length);
  const rewrite = (arg: string) => mapPorts(mapPaths(expand(arg, env), mounts), ports);
  const args = (container.args ?? []).map(rewrite);
  const [entry, ...entryArgs] = container.command ?? [];
  const processEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...env };
  if (entry === 'durable-csi') {
    if (ctx.kubeconfig) processEnv.KUBECONFIG = ctx.kubeconfig;
    return {
      container: container.name,
      command: process.execPath,
      args: [CLI_MAIN, ...entryArgs, ...args],
      env: processEnv,
    };
  }
  if (entry !== undefined) throw new Error(`container ${container.name}: unexpected command ${entry}`);
  const image = (container.image ?? '').replace(/:.*$/, '').split('/').pop() ?? '';
  const binary = (ctx.tools as unknown as Record<string, string>)[image];
  if (!binary) throw new Error(`container ${container.name}: no local binary for image ${container.image}`);
  const kubeconfig = ctx.kubeconfig ? [`--kubeconfig=${ctx.kubeconfig}`] : [];
  return { container: container.name, command: binary, args: [...args, ...kubeconfig], env: processEnv };
}

function containerEnv(container: V1Container, ctx: PodContext): Record<string, string> {
  const env: Record<string, string> = {};
  for (const source of container.envFrom ?? []) {
    const name = source.configMapRef?.name;
    const data = name ? ctx.configMaps.get(name) : undefined;
    if (!data) throw new Error(`container ${container.name}: envFrom ${name ?? '?'} is not a rendered ConfigMap`);
    Object.assign(env, data);
  }
  for (const variable of container.env ?? []) {
    if (variable.value !== undefined) env[variable.name] = expand(variable.value, env);
    else if (variable.valueFrom?.fieldRef) env[variable.name] = fieldValue(variable.valueFrom.fieldRef.fieldPath, ctx);
    else if (variable.valueFrom?.configMapKeyRef) {
      const ref = variable.valueFrom.configMapKeyRef;
      const value = ctx.configMaps.get(ref.name ?? '')?.[ref.key];
      // kubelet leaves an optional variable whose key is absent unset, and refuses to start without a required one.
      if (value !== undefined) env[variable.name] = value;
      else if (!ref.optional) throw new Error(`container ${container.name}: env ${variable.name}: no key ${ref.key}`);
    } else throw new Error(`container ${container.name}: env ${variable.name} has a source the e2e cannot emulate`);
  }
  return {
    ...env,
    ...Object.fromEntries(
      Object.keys(ctx.envOverrides)
        .filter((k) => k in env)
        .map((k) => [k, ctx.envOverrides[k] ?? '']),
    ),
  };
}

function fieldValue(fieldPath: string, ctx: PodContext): string {
  if (fieldPath === 'metadata.name') return ctx.podName;
  if (fieldPath === 'metadata.namespace') return ctx.namespace;
  if (fieldPath === 'spec.nodeName' && ctx.nodeName) return ctx.nodeName;
  // The processes share the host's network: loopback is where each Pod's ports are (mapped apart in `ports`).
  if (fieldPath === 'status.podIP') return '127.0.0.1';
  throw new Error(`fieldRef ${fieldPath} is not emulated`);
}

/** Kubernetes' $(VAR) expansion: defined variables are replaced, $$ escapes, anything else is left as is. */
export function expand(text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (match, name: string | undefined) =>
    match === '$$' ? '$' : name !== undefined && name in env ? (env[name] ?? '') : match,
  );
}

function mapPaths(arg: string, mounts: { from: string; to: string }[]): string {
  for (const { from, to } of mounts) {
    const pattern = new RegExp(`(^|=|//)${escapeRegExp(from)}(?=/|$)`);
    if (pattern.test(arg)) return arg.replace(pattern, (_m, lead: string) => `${lead}${to}`);
  }
  return arg;
}

function mapPorts(arg: string, ports: Map<number, number>): string {
  return arg.replace(/(=|:)(\d+)$/, (match, lead: string, port: string) => {
    const host = ports.get(Number(port));
    return host === undefined ? match : `${lead}${host}`;
  });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Starts a container's process in a UTS namespace whose hostname is the Pod's name, as in a Pod: the sidecars'
 * leader election identifies each replica by hostname, and two replicas on one host would both lead. Needs root
 * (the e2e already does, for the rest of `npm test`); without it this fails loudly.
 */
export function startLaunch(name: string, run: Launch, podName: string, logDir: string): Proc {
  const inPod = ['--uts', '--', 'sh', '-c', 'hostname "$0" && exec "$@"', podName, run.command, ...run.args];
  return startProcess(name, 'unshare', inPod, { logDir, env: { ...run.env, HOSTNAME: podName } });
}
