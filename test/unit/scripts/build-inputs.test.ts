import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

interface BuildInputs {
  inputsFingerprint(root: string): string;
  isBuildFresh(root: string, fingerprint: string): boolean;
  recordBuild(root: string, fingerprint: string): void;
  forgetBuild(root: string): void;
}
// A plain Node script (setup.js runs it before node_modules exists), loaded as such.
const buildInputs = jest.requireActual<BuildInputs>('../../../scripts/build-inputs');

/** When `npm run dev` / `npm test` rebuild: exactly when an input of the build changed, on real files. */
describe('scripts/build-inputs: is dist/ built from the current sources?', () => {
  let root: string;
  const write = (file: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.writeFileSync(path.join(root, file), text);
  };
  const built = () => buildInputs.recordBuild(root, buildInputs.inputsFingerprint(root));
  const fresh = () => buildInputs.isBuildFresh(root, buildInputs.inputsFingerprint(root));

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-build-inputs-'));
    write('cli/main.ts', 'export {};\n');
    write('csi/csi.proto', 'syntax = "proto3";\n');
    write('package.json', '{}\n');
    write('package-lock.json', '{}\n');
    write('tsconfig.json', '{}\n');
    write('README.md', '# readme\n');
    write('agent/pluginregistration.proto', 'syntax = "proto3";\n');
    const outputs = [
      'dist/cli/main.js',
      'dist/workflow-bundle.js',
      'dist/csi/csi.proto',
      'dist/agent/pluginregistration.proto',
    ];
    for (const output of outputs) write(output, '');
    built();
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('is fresh right after a build', () => {
    expect(fresh()).toBe(true);
  });

  it.each([
    ['a changed source', () => write('cli/main.ts', 'export const x = 1;\n')],
    ['a changed proto', () => write('csi/csi.proto', 'syntax = "proto3"; package csi;\n')],
    ['a new source', () => write('agent/new-thing.ts', 'export {};\n')],
    ['a removed source', () => fs.rmSync(path.join(root, 'cli/main.ts'))],
    ['a renamed source', () => fs.renameSync(path.join(root, 'cli/main.ts'), path.join(root, 'cli/entry.ts'))],
    ['changed dependencies', () => write('package-lock.json', '{"lockfileVersion":3}\n')],
    ['a changed tsconfig', () => write('tsconfig.json', '{"compilerOptions":{}}\n')],
    ['a missing output', () => fs.rmSync(path.join(root, 'dist/workflow-bundle.js'))],
  ])('is stale after %s', (_what, change) => {
    change();
    expect(fresh()).toBe(false);
  });

  it('is stale after a change whose file looks older than the build (a checkout, a copy with its times)', () => {
    write('cli/main.ts', 'export const y = 2;\n');
    fs.utimesSync(path.join(root, 'cli/main.ts'), new Date(2000, 0, 1), new Date(2000, 0, 1));
    expect(fresh()).toBe(false);
  });

  it('stays fresh when only documentation, data or outputs change', () => {
    write('README.md', '# changed\n');
    write('.data/pools/node-1/pool.json', '{"id":"x"}\n');
    write('node_modules/x/index.js', 'module.exports = 1;\n');
    write('dist/cli/main.js', '// rebuilt by hand\n');
    write('csi/generated/csi.ts', 'export {};\n');
    write('test-artifacts/report.json', '{}\n');
    expect(fresh()).toBe(true);
  });

  it('is stale while a build is under way or after one failed (forgotten before it starts)', () => {
    buildInputs.forgetBuild(root);
    expect(fresh()).toBe(false);
  });
});
