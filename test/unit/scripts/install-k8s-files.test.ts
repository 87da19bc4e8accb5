/**
 * scripts/install-k8s-tools.js copies the snapshot and group snapshot CRDs from the external-snapshotter client
 * module into the build's cache directory: from the directory `go mod download -json` names, stamped on their own
 * so that a present copy is not fetched again and the binaries (and their stamp) are never touched. `go` is a
 * script here that logs its calls and answers for a module directory of the test's.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

interface Build {
  name: string;
  files?: { module: string; version: string; copy: Record<string, string> };
}
type Installer = {
  SETS: Build[];
  files(): Record<string, string>;
  binaries(): Record<string, string>;
  installFiles(build: Build): void;
};

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-k8s-files-'));
const cache = path.join(root, 'cache');
const moduleDir = path.join(root, 'module');
const goLog = path.join(root, 'go.log');
const saved = { tools: process.env.DURABLE_CSI_K8S_TOOLS, go: process.env.GO };
// Plain Node script (runs before node_modules may exist), loaded as such.
const installer = jest.requireActual<Installer>('../../../scripts/install-k8s-tools');
const sidecars = installer.SETS.find((set) => set.name === 'sidecars');

beforeAll(() => {
  process.env.DURABLE_CSI_K8S_TOOLS = cache;
  const fakeGo = path.join(root, 'go');
  const answer = JSON.stringify({
    Path: 'x',
    Version: 'v8.7.0',
    Dir: moduleDir,
    GoMod: path.join(moduleDir, 'go.mod'),
  });
  fs.writeFileSync(
    fakeGo,
    `#!/bin/sh\necho "$*" >> '${goLog}'\n[ "$1" = version ] && { echo 'go version go1.26.8 linux/amd64'; exit 0; }\n` +
      `[ "$1 $2 $3" = "mod download -json" ] && { echo '${answer}'; exit 0; }\nexit 2\n`,
    { mode: 0o755 },
  );
  process.env.GO = fakeGo;
  fs.mkdirSync(path.join(moduleDir, 'config', 'crd'), { recursive: true });
  fs.writeFileSync(path.join(moduleDir, 'go.mod'), 'module github.com/kubernetes-csi/external-snapshotter/client/v8\n');
  for (const relative of Object.values(sidecars?.files?.copy ?? {}))
    fs.writeFileSync(path.join(moduleDir, relative), `# ${path.basename(relative)}\nkind: CustomResourceDefinition\n`);
});

afterAll(() => {
  for (const [key, value] of [
    ['DURABLE_CSI_K8S_TOOLS', saved.tools],
    ['GO', saved.go],
  ] as const)
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  fs.rmSync(root, { recursive: true, force: true });
});

const goCalls = () => (fs.existsSync(goLog) ? fs.readFileSync(goLog, 'utf8').trim().split('\n') : []);

describe('the snapshot CRDs of the sidecars set', () => {
  it('are the three snapshot.storage.k8s.io and three groupsnapshot CRDs of the client module, at its version', () => {
    expect(sidecars?.files?.module).toBe('github.com/kubernetes-csi/external-snapshotter/client/v8');
    expect(sidecars?.files?.version).toBe('v8.7.0');
    expect(Object.values(sidecars?.files?.copy ?? {}).sort()).toEqual([
      'config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml',
      'config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml',
      'config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml',
      'config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml',
      'config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml',
      'config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml',
    ]);
    // In the build's cache directory, beside its bin/ (not in it).
    const binDir = path.dirname(installer.binaries()['csi-snapshotter'] ?? '');
    for (const file of Object.values(installer.files())) {
      expect(path.dirname(path.dirname(file))).toBe(path.dirname(binDir));
      expect(path.dirname(file)).not.toBe(binDir);
    }
  });

  it('are copied from the module cache beside built binaries, whose stamp stays as it was', () => {
    if (!sidecars) throw new Error('no sidecars set');
    // A set whose binaries are built: its bin/ and stamp, as a finished build leaves them.
    const binary = installer.binaries()['csi-snapshotter'] ?? '';
    const setDir = path.dirname(path.dirname(binary));
    fs.mkdirSync(path.dirname(binary), { recursive: true });
    fs.writeFileSync(binary, 'binary');
    const stampText = '{"module":"m","sha256":{"csi-snapshotter":"abc"}}\n';
    fs.writeFileSync(path.join(setDir, 'stamp.json'), stampText);

    installer.installFiles(sidecars);
    expect(goCalls()).toEqual([
      'version',
      'mod download -json github.com/kubernetes-csi/external-snapshotter/client/v8@v8.7.0',
    ]);
    for (const [name, file] of Object.entries(installer.files())) {
      const source = path.join(moduleDir, sidecars.files?.copy[name] ?? '');
      expect(fs.readFileSync(file, 'utf8')).toBe(fs.readFileSync(source, 'utf8'));
    }
    expect(fs.readFileSync(path.join(setDir, 'stamp.json'), 'utf8')).toBe(stampText);
    expect(fs.readFileSync(binary, 'utf8')).toBe('binary');
  });

  it('a present copy is not fetched again; a changed or missing one is', () => {
    if (!sidecars) throw new Error('no sidecars set');
    fs.rmSync(goLog, { force: true });
    installer.installFiles(sidecars);
    expect(goCalls()).toEqual([]);

    const [first, second] = Object.values(installer.files());
    fs.writeFileSync(first ?? '', 'edited');
    fs.rmSync(second ?? '');
    installer.installFiles(sidecars);
    expect(goCalls()).toHaveLength(2);
    for (const file of Object.values(installer.files())) expect(fs.readFileSync(file, 'utf8')).toMatch(/^# /);
  });
});
