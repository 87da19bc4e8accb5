/** A fresh pool under os.tmpdir() per test, and helpers to look at (and tamper with) what is on disk. */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { StorageBackend } from '../../../storage/pool/backend';
import { DirBackend } from '../../../storage/dir/dir-backend';
import type { PoolBackendOptions } from '../../../storage/pool/pool-backend';
import { mountPoolFilesystem, releaseMountsUnder } from './mount-helpers';
import type { PoolFilesystem } from './mount-helpers';

export const GI = 1024 ** 3;

export function randomKey(): string {
  return randomBytes(16).toString('hex');
}

type Make<B> = (options: PoolBackendOptions) => B;

/** A pool of one backend kind (dir unless another constructor is given) in a fresh temporary directory. */
export class PoolFixture<B extends StorageBackend = DirBackend> {
  readonly root: string;
  readonly pool: string;
  private readonly backends: B[] = [];

  constructor(
    private readonly make: Make<B> = ((options) =>
      new DirBackend({ ...options, quota: 'none' })) as Make<unknown> as Make<B>,
    label = 'dir',
  ) {
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), `durable-csi-${label}-`));
    this.pool = path.join(this.root, 'pool');
  }

  /** A new backend on the same pool: after a crash, this is what the restarted agent creates. */
  backend(capacityBytes = 10 * GI): B {
    const backend = this.make({ pool: this.pool, capacityBytes });
    this.backends.push(backend);
    return backend;
  }

  async opened(capacityBytes = 10 * GI): Promise<B> {
    const backend = this.backend(capacityBytes);
    await backend.open();
    return backend;
  }

  /** Puts the pool on a filesystem of its own (before any backend opens it); cleanup unmounts it. */
  onFilesystem(kind: PoolFilesystem, bytes = 2 * GI): this {
    mountPoolFilesystem(kind, path.join(this.root, `${kind}.img`), this.pool, bytes);
    return this;
  }

  /** Every path under the fixture's root, sorted: equal listings mean nothing was created or removed. */
  tree(): string[] {
    return fs
      .readdirSync(this.root, { recursive: true })
      .map((entry) => String(entry))
      .sort();
  }

  exists(...parts: string[]): boolean {
    return fs.existsSync(path.join(this.pool, ...parts));
  }

  list(dir: string): string[] {
    return fs.readdirSync(path.join(this.pool, dir)).sort();
  }

  async cleanup(): Promise<void> {
    for (const backend of this.backends.splice(0)) await backend.close();
    releaseMountsUnder(this.root);
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}
