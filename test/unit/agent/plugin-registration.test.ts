import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { startPluginRegistration, type PluginRegistration } from '../../../agent/plugin-registration';
import { createIdentityService } from '../../../csi/identity-service';
import { serveCsi, type RunningServer } from '../../../csi/server';

/**
 * kubelet's side of plugin registration, spoken with the client proto-loader builds from the same .proto (as
 * kubelet's generated code would): the agent builds its service definition itself (csi/proto.ts grpcServices), and
 * what kubelet reads must not change with that.
 */
const PROTO = path.join(__dirname, '..', '..', '..', 'agent', 'pluginregistration.proto');

type Callback = (error: grpc.ServiceError | null, answer?: Record<string, unknown>) => void;
interface KubeletClient extends grpc.Client {
  GetInfo(request: object, done: Callback): void;
  NotifyRegistrationStatus(request: object, done: Callback): void;
}

describe('plugin registration', () => {
  let dir: string;
  let csi: RunningServer;
  let registration: PluginRegistration | undefined;
  const logger = pino({ level: 'silent' });

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-registration-'));
    const identity = createIdentityService({ driverName: 'reg.test', version: '0', ready: async () => true });
    csi = await serveCsi(`unix://${path.join(dir, 'csi.sock')}`, { identity }, logger);
  });

  afterAll(async () => {
    await registration?.stop();
    await csi.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("answers kubelet's GetInfo and takes its registration status", async () => {
    const registrationDir = path.join(dir, 'plugins_registry');
    registration = await startPluginRegistration({
      registrationDir,
      driverName: 'reg.test',
      kubeletEndpoint: '/var/lib/kubelet/plugins/reg.test/csi.sock',
      csiEndpoint: `unix://${path.join(dir, 'csi.sock')}`,
      logger,
    });
    const loaded = grpc.loadPackageDefinition(
      protoLoader.loadSync(PROTO, { keepCase: true, defaults: true }),
    ) as unknown as {
      pluginregistration: {
        Registration: new (address: string, credentials: grpc.ChannelCredentials) => KubeletClient;
      };
    };
    const kubelet = new loaded.pluginregistration.Registration(
      `unix://${path.join(registrationDir, 'reg.test-reg.sock')}`,
      grpc.credentials.createInsecure(),
    );
    const ask = (method: 'GetInfo' | 'NotifyRegistrationStatus', request: object) =>
      new Promise<Record<string, unknown>>((resolve, reject) =>
        kubelet[method](request, (error, answer) => (error ? reject(error) : resolve(answer ?? {}))),
      );
    try {
      expect(await ask('GetInfo', {})).toEqual({
        type: 'CSIPlugin',
        name: 'reg.test',
        endpoint: '/var/lib/kubelet/plugins/reg.test/csi.sock',
        supported_versions: ['1.0.0'],
      });
      expect(registration.registered()).toBe(false);
      expect(await ask('NotifyRegistrationStatus', { plugin_registered: true, error: '' })).toEqual({});
      expect(registration.registered()).toBe(true);
    } finally {
      kubelet.close();
    }
  });
});
