import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import pino from 'pino';
import { call, connectCsi, withDeadline, type CsiClients } from '../../../csi/client';
import { createIdentityService } from '../../../csi/identity-service';
import * as redact from '../../../csi/redact';
import { callSubject, serveCsi, type CsiServices } from '../../../csi/server';

type Line = { msg: string; method?: string; request?: unknown };

/** Serves Identity and `services` on a fresh socket, logging at `level`; runs `use`; returns the call lines. */
async function callLines(
  level: string,
  services: Omit<CsiServices, 'identity'>,
  use: (clients: CsiClients) => Promise<unknown>,
): Promise<Line[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csi-logging-'));
  const endpoint = `unix://${path.join(dir, 'csi.sock')}`;
  const lines: Line[] = [];
  const logger = pino({ level }, { write: (line: string) => lines.push(JSON.parse(line) as Line) });
  const identity = createIdentityService({ driverName: 'test.csi', version: '0', ready: async () => true });
  const server = await serveCsi(endpoint, { identity, ...services }, logger);
  const clients = connectCsi(endpoint);
  try {
    await use(clients);
    return lines.filter((line) => line.msg !== 'CSI server listening');
  } finally {
    clients.close();
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One GetPluginInfo through the served wrapper at `level`: the log lines written, and redactSecrets' calls. */
async function oneCall(level: string): Promise<{ lines: Line[]; redactions: number }> {
  const spy = jest.spyOn(redact, 'redactSecrets');
  try {
    const lines = await callLines(level, {}, (clients) =>
      call((done) => clients.identity.GetPluginInfo({}, withDeadline(5000), done)),
    );
    return { lines, redactions: spy.mock.calls.length };
  } finally {
    spy.mockRestore();
  }
}

describe('the CSI call log', () => {
  it('at info, writes one line per call and does not copy the request for a debug line it drops', async () => {
    const { lines, redactions } = await oneCall('info');
    expect(lines.map((line) => line.msg)).toEqual(['ok']);
    expect(redactions).toBe(0);
  });

  it('at debug, still writes the redacted request', async () => {
    const { lines, redactions } = await oneCall('debug');
    expect(lines.map((line) => line.msg)).toEqual(['call', 'ok']);
    expect(redactions).toBe(1);
  });
});

/**
 * One NodeStageVolume with secrets through the served wrapper at debug, whose handler fails unexpectedly: the lines
 * written. The wrapper names the request's message type from the service definition, so both lines that carry the
 * request (`call`, `failed`) are redacted by that type's csi_secret fields.
 */
async function oneFailingStage(): Promise<Line[]> {
  const node = {
    NodeStageVolume: async () => {
      throw new Error('unexpected');
    },
  };
  const request = {
    volume_id: 'vol-1',
    staging_target_path: '/staging',
    volume_capability: { mount: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' as const } },
    secrets: { password: 'hunter2' },
    volume_context: { secrets: 'kept' },
  };
  const lines = await callLines('debug', { node }, (clients) =>
    expect(call((done) => clients.node.NodeStageVolume(request, withDeadline(5000), done))).rejects.toThrow(
      'unexpected',
    ),
  );
  return lines.filter((line) => line.method === 'NodeStageVolume');
}

describe('the CSI call log of a request with secrets', () => {
  it('masks them by the request type on the debug and the error line, and keeps fields without the option', async () => {
    const lines = await oneFailingStage();
    expect(lines.map((line) => line.msg)).toEqual(['call', 'failed']);
    for (const line of lines) {
      expect(line.request).toMatchObject({
        volume_id: 'vol-1',
        secrets: { password: '***' },
        volume_context: { secrets: 'kept' },
      });
    }
    expect(JSON.stringify(lines)).not.toContain('hunter2');
  });
});

describe('what a call line says it is about', () => {
  it('names the IDs and the claim, and copies no secret and no other parameter', () => {
    const subject = callSubject({
      name: 'pvc-1',
      volume_id: '',
      parameters: {
        'csi.storage.k8s.io/pv/name': 'pvc-1',
        'csi.storage.k8s.io/pvc/namespace': 'team-a',
        'csi.storage.k8s.io/pvc/name': 'data-db-0',
        fsType: 'xfs',
      },
      secrets: { token: 'hunter2' },
    });
    expect(subject).toEqual({ name: 'pvc-1', pv: 'pvc-1', pvc: 'team-a/data-db-0' });
    expect(callSubject({ snapshot_id: 's1_x', source_volume_id: 'v1_x' })).toEqual({
      snapshot_id: 's1_x',
      source_volume_id: 'v1_x',
    });
    expect(
      callSubject({
        parameters: {
          'csi.storage.k8s.io/volumesnapshot/namespace': 'team-a',
          'csi.storage.k8s.io/volumesnapshot/name': 'nightly',
        },
      }),
    ).toEqual({ volumesnapshot: 'team-a/nightly' });
    expect(callSubject(undefined)).toEqual({});
  });
});
