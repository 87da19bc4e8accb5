import fs from 'node:fs';
import path from 'node:path';
import { describeFailure, runProcess, succeeded } from '../../common/run-process';

/** The name in the frontend's certificate; clients reach 127.0.0.1 and verify this name (--temporal-tls-server-name). */
export const FRONTEND_SERVER_NAME = 'temporal-frontend.durable-csi.test';
/** A second name served without client authentication (like an API-key endpoint), with its own certificate. */
export const API_KEY_SERVER_NAME = 'localhost';

/** PEM files made for one test run. Every key is an unencrypted PKCS#8 P-256 key. */
export interface TestCertificates {
  dir: string;
  ca: string;
  server: { cert: string; key: string };
  /** The certificate for API_KEY_SERVER_NAME (no client certificate asked for there). */
  apiKeyServer: { cert: string; key: string };
  client: { cert: string; key: string };
  /** A CA that signed nothing the server trusts or presents: the wrong --temporal-tls-ca. */
  otherCa: string;
  /** A client certificate signed by otherCa: a certificate the server must refuse. */
  strangerClient: { cert: string; key: string };
}

/**
 * A CA, the frontend's server certificates and client certificates, made with the openssl command (a well-kept tool
 * present wherever Debian is; Node can verify certificates but not issue them). Valid for two days.
 */
export async function makeTestCertificates(dir: string): Promise<TestCertificates> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = (name: string) => path.join(dir, name);
  await makeCa(file('ca'), 'durable-csi test CA');
  await makeCa(file('other-ca'), 'durable-csi unrelated CA');
  await issue(
    file('ca'),
    file('server'),
    'temporal-frontend',
    `subjectAltName=DNS:${FRONTEND_SERVER_NAME}`,
    'serverAuth',
  );
  await issue(
    file('ca'),
    file('api-key-server'),
    API_KEY_SERVER_NAME,
    `subjectAltName=DNS:${API_KEY_SERVER_NAME}`,
    'serverAuth',
  );
  // Temporal's own worker service presents this client certificate to the frontend too.
  await issue(file('ca'), file('client'), 'durable-csi', 'subjectAltName=DNS:durable-csi.test', 'clientAuth');
  await issue(file('other-ca'), file('stranger-client'), 'stranger', 'subjectAltName=DNS:stranger.test', 'clientAuth');
  return certificatesIn(dir);
}

/** The files makeTestCertificates wrote into dir (tests find them next to the CA their config names). */
export function certificatesIn(dir: string): TestCertificates {
  const file = (name: string) => path.join(dir, name);
  const pair = (name: string) => ({ cert: file(`${name}.pem`), key: file(`${name}-key.pem`) });
  return {
    dir,
    ca: file('ca.pem'),
    server: pair('server'),
    apiKeyServer: pair('api-key-server'),
    client: pair('client'),
    otherCa: file('other-ca.pem'),
    strangerClient: pair('stranger-client'),
  };
}

/**
 * Another client certificate from the test CA, valid from a minute ago for `validForSeconds` (a renewal's
 * certificate, or one about to expire): `openssl ca`, as `openssl x509` (3.0) only counts in days.
 */
export async function issueClientCertificate(
  certs: TestCertificates,
  name: string,
  validForSeconds: number,
): Promise<{ cert: string; key: string; notAfter: Date }> {
  const base = path.join(certs.dir, name);
  const work = fs.mkdtempSync(path.join(certs.dir, `${name}-ca-`));
  const file = (leaf: string) => path.join(work, leaf);
  fs.writeFileSync(file('index.txt'), '');
  fs.writeFileSync(file('serial'), `${Date.now().toString(16).padStart(16, '0')}\n`);
  fs.writeFileSync(
    file('ca.cnf'),
    [
      '[ca]',
      'default_ca = test',
      '[test]',
      `database = ${file('index.txt')}`,
      `new_certs_dir = ${work}`,
      `serial = ${file('serial')}`,
      'default_md = sha256',
      'policy = any',
      'unique_subject = no',
      '[any]',
      'commonName = supplied',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(
    file('ext'),
    'subjectAltName=DNS:durable-csi.test\nextendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n' +
      'basicConstraints=critical,CA:FALSE\n',
  );
  await openssl(['req', ...KEY_ARGS, '-keyout', `${base}-key.pem`, '-out', file('csr'), '-subj', '/CN=durable-csi']);
  const notAfter = new Date(Math.floor(Date.now() / 1000 + validForSeconds) * 1000);
  const stamp = (date: Date) => date.toISOString().replace(/[-:T]|\.\d+/g, '');
  await openssl([
    'ca',
    '-batch',
    '-notext',
    '-config',
    file('ca.cnf'),
    '-cert',
    certs.ca,
    '-keyfile',
    certs.ca.replace(/\.pem$/, '-key.pem'),
    '-in',
    file('csr'),
    '-out',
    `${base}.pem`,
    '-startdate',
    stamp(new Date(Date.now() - 60_000)),
    '-enddate',
    stamp(notAfter),
    '-extfile',
    file('ext'),
  ]);
  fs.rmSync(work, { recursive: true });
  return { cert: `${base}.pem`, key: `${base}-key.pem`, notAfter };
}

const KEY_ARGS = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

async function makeCa(base: string, commonName: string): Promise<void> {
  await openssl([
    'req',
    '-x509',
    ...KEY_ARGS,
    '-keyout',
    `${base}-key.pem`,
    '-out',
    `${base}.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=${commonName}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
}

async function issue(ca: string, base: string, commonName: string, san: string, usage: string): Promise<void> {
  await openssl([
    'req',
    ...KEY_ARGS,
    '-keyout',
    `${base}-key.pem`,
    '-out',
    `${base}.csr`,
    '-subj',
    `/CN=${commonName}`,
  ]);
  const extensions = `${base}.ext`;
  fs.writeFileSync(
    extensions,
    `${san}\nextendedKeyUsage=${usage}\nkeyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n`,
  );
  await openssl([
    'x509',
    '-req',
    '-in',
    `${base}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}-key.pem`,
    '-CAcreateserial',
    '-out',
    `${base}.pem`,
    '-days',
    '2',
    '-extfile',
    extensions,
  ]);
  fs.rmSync(`${base}.csr`);
  fs.rmSync(extensions);
}

async function openssl(args: string[]): Promise<void> {
  const result = await runProcess('openssl', args);
  if (!succeeded(result)) throw new Error(`making test certificates: ${describeFailure(result)}`);
}
