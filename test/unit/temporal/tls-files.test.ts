import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeTestCertificates, type TestCertificates } from '../../temporal-prod/certificates';
import { followTlsFiles, readTlsMaterial, type TlsMaterial } from '../../../temporal/tls-files';

/**
 * The TLS file follower's refusals, with real certificates (openssl): a set caught mid-rotation or a key of another
 * certificate keeps the current connection and says why, once; a whole new set is applied once; a failed apply is
 * tried again on the next tick.
 */
describe('the Temporal TLS files follower', () => {
  let certs: TestCertificates;
  let dir: string;
  const config = () => ({
    address: '127.0.0.1:7233',
    namespace: 'default',
    tlsCert: path.join(dir, 'tls.crt'),
    tlsKey: path.join(dir, 'tls.key'),
    tlsCa: path.join(dir, 'ca.crt'),
  });
  const install = (pair: { cert: string; key: string }, which: ('cert' | 'key')[] = ['cert', 'key']) => {
    if (which.includes('cert')) fs.copyFileSync(pair.cert, config().tlsCert);
    if (which.includes('key')) fs.copyFileSync(pair.key, config().tlsKey);
  };

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-tls-files-'));
    certs = await makeTestCertificates(path.join(dir, 'made'));
    fs.copyFileSync(certs.ca, config().tlsCa);
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Ticks of the follower until `until` holds (the interval is 10 ms). */
  const ticks = async (until: () => boolean) => {
    for (let waited = 0; !until() && waited < 5000; waited += 10)
      await new Promise((resolve) => setTimeout(resolve, 10));
  };

  it('refuses a key that is not the certificate’s, naming both files', () => {
    install(certs.client, ['cert']);
    install(certs.strangerClient, ['key']);
    expect(() => readTlsMaterial(config())).toThrow(
      `the key in ${config().tlsKey} does not belong to the certificate in ${config().tlsCert}`,
    );
  });

  it('keeps the connection through a half-done rotation, applies the whole set once, retries a failed apply', async () => {
    install(certs.client);
    const current = readTlsMaterial(config());
    const applied: TlsMaterial[] = [];
    const errors: string[] = [];
    let failNext = false;
    const stop = followTlsFiles(
      config(),
      current,
      async (next) => {
        if (failNext) {
          failNext = false;
          throw new Error('refused by the server');
        }
        applied.push(next);
      },
      (message) => errors.push(message),
      10,
    );
    try {
      // The certificate is renewed first, its key a moment later.
      install(certs.strangerClient, ['cert']);
      await ticks(() => errors.length > 0);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(applied).toEqual([]);
      expect(errors).toEqual([
        'the Temporal TLS files changed and do not make a usable set: the key in ' +
          `${config().tlsKey} does not belong to the certificate in ${config().tlsCert}; keeping the current ` +
          'connection, looking again in 0.01 s',
      ]);
      failNext = true;
      install(certs.strangerClient, ['key']);
      await ticks(() => applied.length > 0);
      expect(errors[1]).toBe(
        'cannot connect to Temporal with the new TLS files: refused by the server; keeping the current connection, ' +
          'trying again in 0.01 s',
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(applied).toHaveLength(1);
      expect(applied[0]?.cert?.equals(fs.readFileSync(certs.strangerClient.cert))).toBe(true);
      expect(applied[0]?.notAfter?.getTime()).toBeGreaterThan(Date.now());
    } finally {
      stop();
    }
  });

  it('refuses an empty certificate file', () => {
    install(certs.client);
    fs.writeFileSync(config().tlsCert, '\n');
    expect(() => readTlsMaterial(config())).toThrow(`${config().tlsCert} is empty`);
  });
});
