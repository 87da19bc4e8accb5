import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import pino from 'pino';
import { call, connectCsi, withDeadline } from '../../../csi/client';
import { createIdentityService } from '../../../csi/identity-service';
import * as redact from '../../../csi/redact';
import { serveCsi } from '../../../csi/server';

/** One GetPluginInfo through the served wrapper at `level`: the log lines written, and redactSecrets' calls. */
async function oneCall(level: string): Promise<{ lines: { msg: string }[]; redactions: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csi-logging-'));
  const endpoint = `unix://${path.join(dir, 'csi.sock')}`;
  const lines: { msg: string }[] = [];
  const logger = pino({ level }, { write: (line: string) => lines.push(JSON.parse(line) as { msg: string }) });
  const spy = jest.spyOn(redact, 'redactSecrets');
  const identity = createIdentityService({ driverName: 'test.csi', version: '0', ready: async () => true });
  const server = await serveCsi(endpoint, { identity }, logger);
  const clients = connectCsi(endpoint);
  try {
    await call((done) => clients.identity.GetPluginInfo({}, withDeadline(5000), done));
    return { lines: lines.filter((line) => line.msg !== 'CSI server listening'), redactions: spy.mock.calls.length };
  } finally {
    spy.mockRestore();
    clients.close();
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
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
