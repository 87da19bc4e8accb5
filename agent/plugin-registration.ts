import * as grpc from '@grpc/grpc-js';
import * as protobuf from 'protobufjs';
import fs from 'node:fs';
import path from 'node:path';
import { call, connectCsi, withDeadline } from '../csi/client';
import { removeStaleSocket } from '../csi/endpoint';
import { grpcServices } from '../csi/proto';
import type { Logger } from '../common/logger';

/**
 * kubelet's plugin registration (pluginregistration v1), served by the node agent itself instead of
 * node-driver-registrar (docs/kubernetes.md, "Registration"): a socket in kubelet's plugins_registry directory
 * answering GetInfo with the CSI socket's path as kubelet sees it. kubelet then calls NodeGetInfo on that socket,
 * writes the CSINode entry and labels the Node with our topology keys, and reports back through
 * NotifyRegistrationStatus. Removing the socket (stop) makes kubelet deregister the plugin.
 */
export interface PluginRegistrationOptions {
  /** kubelet's plugins_registry directory as this process sees it (a hostPath mount). */
  registrationDir: string;
  driverName: string;
  /** The CSI socket as kubelet sees it: the host path of our --endpoint. */
  kubeletEndpoint: string;
  /** Our own CSI endpoint: registration waits until it answers. */
  csiEndpoint: string;
  logger: Logger;
  /** How long to wait before offering the socket again after kubelet refused the plugin. */
  retryAfterMs?: number;
}

export interface PluginRegistration {
  /** True once kubelet answered that it registered the plugin (and until it says otherwise). */
  registered(): boolean;
  stop(): Promise<void>;
}

const PROTO_PATH = path.join(__dirname, 'pluginregistration.proto');
const CSI_VERSIONS = ['1.0.0'];

interface RegistrationStatus {
  plugin_registered: boolean;
  error: string;
}

export async function startPluginRegistration(options: PluginRegistrationOptions): Promise<PluginRegistration> {
  const logger = options.logger.child({ part: 'plugin-registration' });
  // kubelet dials the CSI socket at once on GetInfo and refuses the plugin if it cannot: register only once it answers.
  await csiAnswers(options.csiEndpoint);
  const socketPath = path.join(options.registrationDir, `${options.driverName}-reg.sock`);
  let registered = false;
  let stopped = false;
  let server: grpc.Server | undefined;
  let retry: NodeJS.Timeout | undefined;

  const offer = async () => {
    server = new grpc.Server();
    server.addService(registrationService(), {
      GetInfo: (_call: unknown, done: grpc.sendUnaryData<unknown>) =>
        done(null, {
          type: 'CSIPlugin',
          name: options.driverName,
          endpoint: options.kubeletEndpoint,
          supported_versions: CSI_VERSIONS,
        }),
      NotifyRegistrationStatus: (
        request: grpc.ServerUnaryCall<RegistrationStatus, unknown>,
        done: grpc.sendUnaryData<unknown>,
      ) => {
        registered = request.request.plugin_registered;
        if (registered) logger.info({ endpoint: options.kubeletEndpoint }, 'kubelet registered the plugin');
        else {
          logger.error({ error: request.request.error }, 'kubelet refused the plugin; offering it again');
          // kubelet only retries for a new socket: take this one away and offer it again a little later.
          retry ??= setTimeout(() => {
            retry = undefined;
            void reoffer();
          }, options.retryAfterMs ?? 5000);
        }
        done(null, {});
      },
    });
    fs.mkdirSync(options.registrationDir, { recursive: true });
    removeStaleSocket(socketPath);
    await bind(server, `unix://${socketPath}`);
    logger.info({ socket: socketPath }, 'registration socket offered to kubelet');
  };
  const withdraw = async () => {
    const current = server;
    server = undefined;
    registered = false;
    removeStaleSocket(socketPath);
    if (current) await new Promise<void>((resolve) => current.tryShutdown(() => resolve()));
  };
  const reoffer = async () => {
    if (stopped) return;
    await withdraw();
    if (!stopped) await offer().catch((error: unknown) => logger.error({ err: error }, 'registration socket failed'));
  };

  await offer();
  return {
    registered: () => registered,
    stop: async () => {
      stopped = true;
      if (retry) clearTimeout(retry);
      await withdraw();
    },
  };
}

function registrationService(): grpc.ServiceDefinition {
  const root = new protobuf.Root().loadSync(PROTO_PATH, { keepCase: true }).resolveAll();
  const service = grpcServices(root, 'pluginregistration', { defaults: true }).Registration;
  if (!service) throw new Error(`${PROTO_PATH} declares no pluginregistration.Registration`);
  return service.service;
}

function bind(server: grpc.Server, address: string): Promise<void> {
  return new Promise((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve())),
  );
}

/** Resolves once the CSI endpoint answers GetPluginInfo (it normally does at once: it is served before this). */
async function csiAnswers(endpoint: string, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const clients = connectCsi(endpoint);
    try {
      await call((done) => clients.identity.GetPluginInfo({}, withDeadline(2000), done));
      return;
    } catch (error) {
      if (Date.now() > until) throw new Error(`CSI endpoint ${endpoint} does not answer: ${String(error)}`);
    } finally {
      clients.close();
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
