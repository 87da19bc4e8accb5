import * as grpc from '@grpc/grpc-js';
import { parseEndpoint } from './endpoint';
import type { ControllerClient } from './generated/csi/v1/Controller';
import type { IdentityClient } from './generated/csi/v1/Identity';
import type { NodeClient } from './generated/csi/v1/Node';
import { csiPackage } from './proto';

/** Promise wrappers over the generated CSI clients, for the operator CLI, the benchmark and the tests. */
export interface CsiClients {
  identity: IdentityClient;
  controller: ControllerClient;
  node: NodeClient;
  close(): void;
}

export function connectCsi(endpoint: string): CsiClients {
  const csi = csiPackage();
  const { address } = parseEndpoint(endpoint);
  const credentials = grpc.credentials.createInsecure();
  const identity = new csi.Identity(address, credentials);
  const channelOverride = identity.getChannel();
  const controller = new csi.Controller(address, credentials, { channelOverride });
  const node = new csi.Node(address, credentials, { channelOverride });
  return { identity, controller, node, close: () => identity.close() };
}

type Callback<Res> = (error: grpc.ServiceError | null, response?: Res) => void;

/** `await call((done) => clients.controller.CreateVolume(request, withDeadline(), done))` */
export function call<Res>(invoke: (callback: Callback<Res>) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke((error, response) => (error ? reject(error) : resolve(response as Res)));
  });
}

export function withDeadline(timeoutMs = 30_000): grpc.CallOptions {
  return { deadline: Date.now() + timeoutMs };
}
