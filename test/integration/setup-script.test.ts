import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findProjectRoot } from '../../common/project-root';
import { locateTemporalCli } from '../../temporal-dev/locate-cli';

interface BuildInputs {
  inputsFingerprint(root: string): string;
  recordBuild(root: string, fingerprint: string): void;
}
const buildInputs = jest.requireActual<BuildInputs>('../../scripts/build-inputs');

/**
 * The real scripts/setup.js (what `npm run dev` and `npm test` run first) on a copy of the project: it skips
 * the build when nothing changed, and rebuilds when a source did.
 */
describe('scripts/setup.js', () => {
  const root = findProjectRoot();
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-setup-'));
  afterAll(() => fs.rmSync(copy, { recursive: true, force: true }));

  const setup = async () => {
    const env = { ...process.env, npm_lifecycle_event: 'dev', TEMPORAL_CLI: await locateTemporalCli() };
    return new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ['scripts/setup.js'], { cwd: copy, env, timeout: 300_000 }, (error, out, err) =>
        error ? reject(new Error(`setup.js failed: ${err}${out}`)) : resolve(err + out),
      ),
    );
  };

  it('builds only when an input of the build changed', async () => {
    const skipped = new Set(['node_modules', '.git', '.tools', '.data', 'test-artifacts', 'coverage']);
    fs.cpSync(root, copy, {
      recursive: true,
      preserveTimestamps: true, // as a checkout left them: the dependencies stay up to date
      filter: (source) => !skipped.has(path.relative(root, source).split(path.sep)[0]!),
    });
    fs.symlinkSync(fs.realpathSync(path.join(root, 'node_modules')), path.join(copy, 'node_modules'));
    // The copy is a new checkout (its lock newer than the installed dependencies, as in a second git worktree):
    // the dependencies are judged by the lock's content, so no `npm ci` runs through the link.
    if (!fs.existsSync(path.join(copy, 'node_modules', '.durable-csi-lock.sha256'))) {
      throw new Error('node_modules carries no lock mark: run `node scripts/setup.js` (or `npm test`) first');
    }
    const later = new Date(Date.now() + 60_000);
    fs.utimesSync(path.join(copy, 'package-lock.json'), later, later);
    buildInputs.recordBuild(copy, buildInputs.inputsFingerprint(copy)); // as after a build
    const bundle = path.join(copy, 'dist', 'workflow-bundle.js');
    const bundleTime = fs.statSync(bundle).mtimeMs;

    const unchanged = await setup();
    expect(unchanged).toContain('setup: build is up to date');
    expect(unchanged).not.toContain('setup: build:');
    expect(unchanged).not.toContain('install dependencies');
    expect(fs.statSync(bundle).mtimeMs).toBe(bundleTime);

    fs.appendFileSync(path.join(copy, 'cli', 'table.ts'), '\nexport const SETUP_TEST_MARKER = 1;\n');
    const changed = await setup();
    expect(changed).toContain('setup: build: npm run build');
    expect(fs.readFileSync(path.join(copy, 'dist', 'cli', 'table.js'), 'utf8')).toContain('SETUP_TEST_MARKER');

    expect(await setup()).toContain('setup: build is up to date');
  }, 300_000);
});
