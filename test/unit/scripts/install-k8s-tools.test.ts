/**
 * scripts/install-k8s-tools.js builds every Kubernetes binary, sidecar and the storage suite from ONE wrapper module
 * (one module graph: each package compiles once), set by set in the order the tests need them, and caches them by
 * version: a warm cache runs no `go` at all. `go` is a Node script here that logs each call with its directory and
 * writes the binaries it is asked for; the upstream go.mod files are small stand-ins with the lines that matter.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SCRIPT = path.resolve(__dirname, '../../../scripts/install-k8s-tools.js');
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-k8s-tools-'));
const cache = path.join(root, 'cache');
const goLog = path.join(root, 'go.log');
const fakeGo = path.join(root, 'go');
const modules = path.join(root, 'modules');

/** What the fake `go` answers for `go mod download -json`: each module's go.mod, as upstream has the lines used. */
const GO_MODS: Record<string, string> = {
  'k8s.io/kubernetes': [
    'module k8s.io/kubernetes',
    'require (',
    '\tgithub.com/onsi/ginkgo/v2 v2.32.0',
    '\tgo.etcd.io/etcd/client/v3 v3.7.0',
    '\tgo.etcd.io/etcd/server/v3 v3.7.0 // indirect',
    '\tgoogle.golang.org/grpc v1.82.1',
    ')',
    'replace (',
    '\tk8s.io/api => ./staging/src/k8s.io/api',
    '\tk8s.io/client-go => ./staging/src/k8s.io/client-go',
    ')',
  ].join('\n'),
  'github.com/kubernetes-csi/external-provisioner/v6': [
    'module github.com/kubernetes-csi/external-provisioner/v6',
    'require k8s.io/client-go v0.37.0',
    'replace k8s.io/client-go => k8s.io/client-go v0.36.1',
  ].join('\n'),
  'github.com/kubernetes-csi/external-resizer/v2': 'module github.com/kubernetes-csi/external-resizer/v2\n',
  'github.com/kubernetes-csi/external-snapshotter/v8': [
    'module github.com/kubernetes-csi/external-snapshotter/v8',
    'replace github.com/kubernetes-csi/external-snapshotter/client/v8 => ./client',
    'replace k8s.io/api => k8s.io/api v0.37.0',
  ].join('\n'),
};

interface GoCall {
  cwd: string;
  args: string[];
}

const calls = (): GoCall[] =>
  fs.existsSync(goLog)
    ? fs
        .readFileSync(goLog, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as GoCall)
    : [];
const builds = (): GoCall[] => calls().filter((call) => call.args[0] === 'build' || call.args[0] === 'test');

function install(...args: string[]): { status: number | null; stderr: string } {
  const result = spawnSync(process.execPath, [SCRIPT, ...args], {
    encoding: 'utf8',
    env: { ...process.env, GO: fakeGo, DURABLE_CSI_K8S_TOOLS: cache },
  });
  return { status: result.status, stderr: result.stderr };
}

function printed(): Record<string, string> {
  const result = spawnSync(process.execPath, [SCRIPT, '--print'], {
    encoding: 'utf8',
    env: { ...process.env, DURABLE_CSI_K8S_TOOLS: cache },
  });
  return JSON.parse(result.stdout) as Record<string, string>;
}

beforeAll(() => {
  for (const [module, goMod] of Object.entries(GO_MODS)) {
    const dir = path.join(modules, module);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'go.mod'), `${goMod}\n`);
  }
  const crds = path.join(modules, 'github.com/kubernetes-csi/external-snapshotter/client/v8', 'config', 'crd');
  fs.mkdirSync(crds, { recursive: true });
  for (const kind of ['volumesnapshotclasses', 'volumesnapshotcontents', 'volumesnapshots'])
    fs.writeFileSync(path.join(crds, `snapshot.storage.k8s.io_${kind}.yaml`), `kind: CustomResourceDefinition\n`);
  for (const kind of ['volumegroupsnapshotclasses', 'volumegroupsnapshotcontents', 'volumegroupsnapshots'])
    fs.writeFileSync(path.join(crds, `groupsnapshot.storage.k8s.io_${kind}.yaml`), `kind: CustomResourceDefinition\n`);
  // `go build -o <dir>/ pkg...` names each binary after the package's last element (a /vN suffix skipped).
  fs.writeFileSync(
    fakeGo,
    `#!${process.execPath}
const fs = require('fs');
const path = require('path');
const args = process.argv.slice(2);
fs.appendFileSync(${JSON.stringify(goLog)}, JSON.stringify({ cwd: process.cwd(), args }) + '\\n');
if (args[0] === 'version') { console.log('go version go1.26.8 linux/amd64'); process.exit(0); }
if (args[0] === 'mod' && args[1] === 'download') {
  const [module, version] = args[3].split('@');
  const dir = path.join(${JSON.stringify(modules)}, module);
  console.log(JSON.stringify({ Path: module, Version: version, Dir: dir, GoMod: path.join(dir, 'go.mod') }));
  process.exit(0);
}
const out = args[args.indexOf('-o') + 1];
if (args[0] === 'test') { fs.writeFileSync(out, 'test ' + args.join(' ')); process.exit(0); }
if (args[0] === 'build') {
  for (const pkg of args.slice(args.indexOf('-o') + 2)) {
    const parts = pkg.split('/');
    const name = /^v[0-9]+$/.test(parts[parts.length - 1]) ? parts[parts.length - 2] : parts[parts.length - 1];
    fs.writeFileSync(path.join(out, name), 'binary of ' + pkg + ' ' + args.join(' '));
  }
  process.exit(0);
}
process.exit(2);
`,
    { mode: 0o755 },
  );
});

afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

describe('one module graph for every Kubernetes binary', () => {
  it('builds the sets one after another in one wrapper module, each compiling with the same flags', () => {
    for (const set of ['kubernetes', 'sidecars', 'agnhost', 'storage-suite']) {
      const result = install(set);
      expect({ set, status: result.status, stderr: result.status === 0 ? '' : result.stderr }).toEqual({
        set,
        status: 0,
        stderr: '',
      });
    }
    const all = builds();
    expect(new Set(all.map((call) => call.cwd)).size).toBe(1);
    for (const call of all)
      expect(call.args).toEqual(expect.arrayContaining(['-trimpath', '-gcflags=all=-dwarf=false']));
    // The control plane's binaries link in one `go build`; the sidecars by main.version; agnhost alone (the images
    // need it before the suite's binary); then ginkgo and the suite's test binary.
    const built = all.map((call) => call.args.slice(call.args.indexOf('-o') + 2));
    expect(built).toEqual([
      [
        'go.etcd.io/etcd/server/v3',
        'k8s.io/kubernetes/cmd/kube-apiserver',
        'k8s.io/kubernetes/cmd/kube-controller-manager',
        'k8s.io/kubernetes/cmd/kubectl',
        'k8s.io/kubernetes/cmd/kubelet',
        'k8s.io/kubernetes/cmd/kube-scheduler',
      ],
      ['github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner'],
      ['github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer'],
      [
        'github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter',
        'github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller',
      ],
      ['k8s.io/kubernetes/test/images/agnhost'],
      ['github.com/onsi/ginkgo/v2/ginkgo'],
      ['./storagesuite'],
    ]);
    expect(all[all.length - 1]?.args).toContain('-vet=off');
    for (const [name, file] of Object.entries(printed()))
      expect({ name, exists: fs.existsSync(file) }).toEqual({ name, exists: true });
    expect(fs.readFileSync(printed().etcd ?? '', 'utf8')).toMatch(/^binary of go.etcd.io\/etcd\/server\/v3 /);
    expect(fs.readFileSync(printed()['csi-resizer'] ?? '', 'utf8')).toContain('-X main.version=v2.3.0');
  });

  it('requires kubernetes and the sidecars, every k8s.io library at the staging version, etcd and Ginkgo as kubernetes pins them', () => {
    const goMod = fs.readFileSync(path.join(builds()[0]?.cwd ?? '', 'go.mod'), 'utf8');
    for (const line of [
      'k8s.io/kubernetes v1.37.2',
      'github.com/kubernetes-csi/external-provisioner/v6 v6.4.0',
      'github.com/kubernetes-csi/external-resizer/v2 v2.3.0',
      'github.com/kubernetes-csi/external-snapshotter/v8 v8.7.0',
      'k8s.io/api => k8s.io/api v0.37.2',
      'k8s.io/client-go => k8s.io/client-go v0.37.2',
      'github.com/kubernetes-csi/external-snapshotter/client/v8 => github.com/kubernetes-csi/external-snapshotter/client/v8 v8.7.0',
      'go.etcd.io/etcd/server/v3 => go.etcd.io/etcd/server/v3 v3.7.0',
      'go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 v3.7.0',
      'github.com/onsi/ginkgo/v2 => github.com/onsi/ginkgo/v2 v2.32.0',
    ])
      expect(goMod).toContain(`\t${line}\n`);
    // Everything else is what minimal version selection picks: grpc is not pinned.
    expect(goMod).not.toContain('google.golang.org/grpc');
  });

  it('a warm cache runs no go command; a binary that changed is built again, alone', () => {
    fs.rmSync(goLog);
    expect(install().status).toBe(0);
    expect(calls()).toEqual([]);

    fs.writeFileSync(printed().kubelet ?? '', 'edited');
    expect(install('kubernetes').status).toBe(0);
    expect(builds().map((call) => call.args[call.args.length - 1])).toEqual(['k8s.io/kubernetes/cmd/kubelet']);
    expect(fs.readFileSync(printed()['csi-provisioner'] ?? '', 'utf8')).toMatch(/^binary of /);
  });

  it('a stamp of another build (versions, pins or flags) rebuilds everything', () => {
    const stampFile = path.join(path.dirname(path.dirname(printed().etcd ?? '')), 'stamp.json');
    const stamp = JSON.parse(fs.readFileSync(stampFile, 'utf8')) as { module: string };
    fs.writeFileSync(stampFile, JSON.stringify({ ...stamp, module: stamp.module.replace('v1.37.2', 'v1.36.3') }));
    fs.rmSync(goLog);
    expect(install('kubernetes').status).toBe(0);
    expect(builds()).toHaveLength(1);
    // The sets not asked for are gone with the old build, not mixed with the new one.
    expect(fs.existsSync(printed()['csi-provisioner'] ?? '')).toBe(false);
  });

  it('refuses an unknown set or binary, naming what there is', () => {
    const result = install('kube-proxy');
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(
      /unknown set or binary kube-proxy \(sets: kubernetes, sidecars, storage-suite; binaries: etcd,/,
    );
  });
});
