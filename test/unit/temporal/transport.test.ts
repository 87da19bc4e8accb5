/** issue 21, items 1 and 11: the Temporal flags refuse a setup weaker than it looks, before any connection. */
import { Command } from 'commander';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { addTemporalOptions, temporalConfig, type TemporalFlags } from '../../../cli/temporal-options';
import { usesTls, type TemporalConfig } from '../../../temporal/config';

function configFrom(args: string[], env: Record<string, string> = {}): TemporalConfig {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const command = addTemporalOptions(new Command('x')).exitOverride();
    command.parse(args, { from: 'user' });
    return temporalConfig(command.opts<TemporalFlags>());
  } finally {
    process.env = saved;
  }
}

describe('plaintext to Temporal', () => {
  it.each(['127.0.0.1:7233', '127.8.9.10:7233', 'localhost:7233', '[::1]:7233', '[::ffff:127.0.0.1]:7233'])(
    'is allowed to loopback %s',
    (address) => {
      expect(configFrom(['--temporal-address', address]).address).toBe(address);
    },
  );

  it.each(['10.0.0.5:7233', 'temporal-frontend.temporal.svc.cluster.local:7233', '[fd00::2]:7233', '0.0.0.0:7233'])(
    'is refused to %s, naming the address and the flag',
    (address) => {
      expect(() => configFrom(['--temporal-address', address])).toThrow(
        new RegExp(`Temporal at ${address.replace(/[[\].]/g, '\\$&')} .*plaintext.*--temporal-insecure`),
      );
    },
  );

  it('is allowed off loopback with --temporal-insecure or TEMPORAL_INSECURE=true, and with TLS or an API key', () => {
    const address = ['--temporal-address', '10.0.0.5:7233'];
    expect(configFrom([...address, '--temporal-insecure']).insecure).toBe(true);
    expect(configFrom(address, { TEMPORAL_INSECURE: 'true' }).insecure).toBe(true);
    expect(usesTls(configFrom([...address, '--temporal-tls']))).toBe(true);
    expect(usesTls(configFrom([...address, '--temporal-api-key-file', '/k']))).toBe(true);
    expect(() => configFrom(address, { TEMPORAL_INSECURE: 'false' })).toThrow(/--temporal-insecure/);
    expect(() => configFrom(address, { TEMPORAL_INSECURE: 'yes' })).toThrow(
      /TEMPORAL_INSECURE is "yes"; it must be true or false/,
    );
  });
});

describe('TLS flags', () => {
  const loopback = ['--temporal-address', '127.0.0.1:7233'];

  it('refuses a client certificate without its key, and a key without its certificate', () => {
    expect(() => configFrom([...loopback, '--temporal-tls-cert', '/c.pem'])).toThrow(
      '--temporal-tls-cert needs --temporal-tls-key too',
    );
    expect(() => configFrom([...loopback, '--temporal-tls-key', '/k.pem'])).toThrow(
      '--temporal-tls-key needs --temporal-tls-cert too',
    );
  });

  it('turns TLS on with a server name alone, or a CA alone', () => {
    expect(usesTls(configFrom([...loopback, '--temporal-tls-server-name', 'frontend.example']))).toBe(true);
    expect(usesTls(configFrom([...loopback, '--temporal-tls-ca', '/ca.pem']))).toBe(true);
    expect(usesTls(configFrom(loopback))).toBe(false);
  });
});

describe('API key file', () => {
  it('is read again when it changes: the new key is applied, a missing or empty file keeps the old one', async () => {
    const { followApiKeyFile } = await import('../../../temporal/api-key-file');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-key-'));
    const file = path.join(dir, 'api-key');
    fs.writeFileSync(file, 'key-1\n');
    const applied: string[] = [];
    const errors: string[] = [];
    const stop = followApiKeyFile(
      file,
      'key-1',
      async (key) => void applied.push(key),
      (m) => void errors.push(m),
      20,
    );
    const settle = () => new Promise((resolve) => setTimeout(resolve, 120));
    try {
      await settle();
      expect(applied).toEqual([]);
      // As kubelet rotates a Secret: a new file, renamed over the old path.
      fs.writeFileSync(`${file}.new`, 'key-2\n');
      fs.renameSync(`${file}.new`, file);
      await settle();
      expect(applied).toEqual(['key-2']);
      fs.writeFileSync(file, '');
      await settle();
      fs.rmSync(file);
      await settle();
      expect(applied).toEqual(['key-2']);
      expect(errors.some((message) => message.includes(`cannot read the API key file ${file}`))).toBe(true);
    } finally {
      stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
