import crypto from 'node:crypto';
import fs from 'node:fs';
import type { TemporalConfig } from './config';

/** The contents of the TLS files a config names, checked: what a connection is made with. */
export interface TlsMaterial {
  cert?: Buffer;
  key?: Buffer;
  ca?: Buffer;
  /** The client certificate's end of validity. */
  notAfter?: Date;
}

/**
 * Reads the client certificate, its key and the CA (each when configured) and checks them as a set: every file
 * present and not empty, the certificate and the CA parse, the key parses and belongs to the certificate. Throws an
 * Error naming the file and the problem: a set caught mid-rotation (kubelet writes a Secret's files together, but a
 * cert-manager renewal seen half-way, or files copied by hand one by one) must not replace a working connection.
 */
export function readTlsMaterial(config: TemporalConfig): TlsMaterial {
  const read = (file: string) => {
    const contents = fs.readFileSync(file);
    if (contents.toString('utf8').trim() === '') throw new Error(`${file} is empty`);
    return contents;
  };
  const certificate = (file: string, contents: Buffer) => {
    try {
      return new crypto.X509Certificate(contents);
    } catch (error) {
      throw new Error(`${file} holds no PEM certificate: ${(error as Error).message}`, { cause: error });
    }
  };
  const material: TlsMaterial = {};
  if (config.tlsCa) {
    material.ca = read(config.tlsCa);
    certificate(config.tlsCa, material.ca);
  }
  if (config.tlsCert && config.tlsKey) {
    material.cert = read(config.tlsCert);
    material.key = read(config.tlsKey);
    const x509 = certificate(config.tlsCert, material.cert);
    let key: crypto.KeyObject;
    try {
      key = crypto.createPrivateKey(material.key);
    } catch (error) {
      throw new Error(`${config.tlsKey} holds no PEM private key: ${(error as Error).message}`, { cause: error });
    }
    if (!x509.checkPrivateKey(key))
      throw new Error(`the key in ${config.tlsKey} does not belong to the certificate in ${config.tlsCert}`);
    material.notAfter = new Date(x509.validTo);
  }
  return material;
}

function sameMaterial(a: TlsMaterial, b: TlsMaterial): boolean {
  const same = (x?: Buffer, y?: Buffer) => (x && y ? x.equals(y) : x === y);
  return same(a.cert, b.cert) && same(a.key, b.key) && same(a.ca, b.ca);
}

/**
 * Follows the TLS files as temporal/api-key-file.ts follows the API key: by polling and comparing contents (kubelet
 * swaps a Secret's files by renaming a symbolic link, so no inotify event reaches a watcher of the old files, and
 * mtimes say nothing). A changed set that reads and checks whole is handed to `apply` (a new connection); a set that
 * does not (missing, empty, a key of another certificate), or an `apply` that fails, keeps the current connection,
 * is logged once per distinct reason, and is looked at again on the next tick. Returns the stop function.
 */
export function followTlsFiles(
  config: TemporalConfig,
  current: TlsMaterial,
  apply: (next: TlsMaterial) => Promise<void>,
  onError: (message: string) => void,
  intervalMs = 10_000,
): () => void {
  let material = current;
  let busy = false;
  let lastError: string | undefined;
  const refuse = (message: string) => {
    if (message !== lastError) onError(message);
    lastError = message;
  };
  const timer = setInterval(() => {
    if (busy) return;
    let next: TlsMaterial;
    try {
      next = readTlsMaterial(config);
    } catch (error) {
      refuse(
        `the Temporal TLS files changed and do not make a usable set: ${(error as Error).message}; ` +
          'keeping the current connection, looking again in ' +
          `${intervalMs / 1000} s`,
      );
      return;
    }
    if (sameMaterial(next, material)) {
      lastError = undefined;
      return;
    }
    busy = true;
    apply(next)
      .then(() => {
        material = next;
        lastError = undefined;
      })
      .catch((error: unknown) =>
        refuse(
          `cannot connect to Temporal with the new TLS files: ${error instanceof Error ? error.message : String(error)}; ` +
            `keeping the current connection, trying again in ${intervalMs / 1000} s`,
        ),
      )
      .finally(() => {
        busy = false;
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
