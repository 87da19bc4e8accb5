import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

type Spec = Record<string, unknown> & { debian: Record<string, unknown>; env: Record<string, string> };
// Plain Node scripts (npm run image runs them before node_modules may exist), loaded as such.
const cache = jest.requireActual<{
  contentKey(inputs: unknown): string;
  publish(built: string, final: string): void;
}>('../../../scripts/image/cache');
const driver = jest.requireActual<{
  rootfsKey(spec: Spec): string;
  depsKey(spec: Spec, rootDir: string): string;
  imageKey(spec: Spec, rootDir: string): string;
}>('../../../scripts/image/driver');
const { driverSpec } = jest.requireActual<{ driverSpec(rootDir?: string): Spec }>('../../../scripts/image/spec');
const { isStaticElf } = jest.requireActual<{ isStaticElf(file: string): boolean }>('../../../scripts/image/elf');

/** npm run image rebuilds a part exactly when something it is made from changed, on real files. */
describe('scripts/image cache keys', () => {
  let root: string;
  const write = (file: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.writeFileSync(path.join(root, file), text);
  };
  const real = path.resolve(__dirname, '../../..');
  const spec = () => driverSpec(root);

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-image-keys-'));
    for (const file of ['package.json', 'package-lock.json', 'deploy/image.json'])
      write(file, fs.readFileSync(path.join(real, file), 'utf8'));
    write('cli/main.ts', 'export {};\n');
    write('README.md', '# readme\n');
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('gives the same key for the same inputs in any key order', () => {
    expect(cache.contentKey({ a: 1, b: [2, 3] })).toBe(cache.contentKey({ b: [2, 3], a: 1 }));
    expect(cache.contentKey({ a: 1, b: [2, 3] })).not.toBe(cache.contentKey({ a: 1, b: [3, 2] }));
  });

  it('keys the Debian rootfs by its package list and sources only', () => {
    const before = driver.rootfsKey(spec());
    expect(driver.rootfsKey({ ...spec(), env: { ...spec().env, NODE_ENV: 'development' } })).toBe(before);
    expect(driver.rootfsKey({ ...spec(), node: '22.22.0' })).toBe(before);
    const more = {
      ...spec(),
      debian: {
        ...spec().debian,
        packages: ['util-linux', 'mount', 'e2fsprogs', 'xfsprogs', 'ca-certificates', 'lvm2'],
      },
    };
    expect(driver.rootfsKey(more)).not.toBe(before);
    expect(driver.rootfsKey({ ...spec(), debian: { ...spec().debian, suite: 'trixie' } })).not.toBe(before);
  });

  it("keys the production dependencies by package-lock.json, package.json's dependencies and the Node.js version", () => {
    const before = driver.depsKey(spec(), root);
    write('cli/main.ts', 'export const changed = 1;\n');
    expect(driver.depsKey(spec(), root)).toBe(before);
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    write('package.json', JSON.stringify({ ...pkg, scripts: { ...pkg.scripts, extra: 'true' } }));
    expect(driver.depsKey(spec(), root)).toBe(before); // a new script installs nothing new
    write('package.json', JSON.stringify({ ...pkg, dependencies: { ...pkg.dependencies, 'left-pad': '1.3.0' } }));
    expect(driver.depsKey(spec(), root)).not.toBe(before);
    write('package.json', JSON.stringify(pkg));
    write('package-lock.json', `${fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8')}\n`);
    expect(driver.depsKey(spec(), root)).not.toBe(before);
    const again = driver.depsKey(spec(), root);
    expect(driver.depsKey({ ...spec(), node: '22.22.0' }, root)).not.toBe(again);
  });

  it('rebuilds the image when a source of dist/ changes, not when the README or a test does', () => {
    write('test/unit/some.test.ts', 'export {};\n');
    const before = driver.imageKey(spec(), root);
    write('README.md', '# changed readme\n');
    expect(driver.imageKey(spec(), root)).toBe(before);
    write('test/unit/some.test.ts', 'export const changed = 1;\n'); // dist/test is no part of the image
    expect(driver.imageKey(spec(), root)).toBe(before);
    write('cli/main.ts', 'export const changed = 1;\n');
    expect(driver.imageKey(spec(), root)).not.toBe(before);
  });

  it('rebuilds the image when deploy/image.json changes (an ENV line)', () => {
    const before = driver.imageKey(spec(), root);
    const json = JSON.parse(fs.readFileSync(path.join(root, 'deploy/image.json'), 'utf8'));
    json.env.MALLOC_ARENA_MAX = '4';
    write('deploy/image.json', JSON.stringify(json));
    expect(driver.imageKey(spec(), root)).not.toBe(before);
  });

  it('keeps one key of a part: publishing a new one removes the old', () => {
    const part = path.join(root, 'cache', 'durable-csi');
    write('cache/durable-csi/old.tar', 'old');
    write('scratch/new.tar', 'new');
    cache.publish(path.join(root, 'scratch/new.tar'), path.join(part, 'new.tar'));
    expect(fs.readdirSync(part)).toEqual(['new.tar']);
    expect(fs.readFileSync(path.join(part, 'new.tar'), 'utf8')).toBe('new');
  });
});

describe('scripts/image static check (the small images hold no libc)', () => {
  it('tells a dynamic executable from a static one', () => {
    expect(isStaticElf('/bin/busybox')).toBe(true); // Debian's busybox-static
    expect(isStaticElf(process.execPath)).toBe(false);
  });

  it('refuses what is not an ELF file', () => {
    expect(() => isStaticElf(__filename)).toThrow(/not an ELF file/);
  });
});
