import { execFileSync, spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const script = path.join(root, 'scripts/image/build.js');
const { PAUSE_IMAGE, BUSYBOX_IMAGE } = jest.requireActual<{ PAUSE_IMAGE: string; BUSYBOX_IMAGE: string }>(
  '../../scripts/image/spec',
);

const buildVersion = jest
  .requireActual<{ describeBuild(dir: string): { version: string } }>('../../scripts/build-info')
  .describeBuild(root).version;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits for a child to exit; its code, or the signal that ended it. */
function exited(child: ChildProcess): Promise<number | string> {
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
}

/** The children of a process, with their state letter (Z: a zombie nobody reaped). */
function children(pid: number): { pid: number; state: string }[] {
  const listed = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return listed
    ? listed.split(/\s+/).map((child) => {
        const stat = fs.readFileSync(`/proc/${child}/stat`, 'utf8');
        return { pid: Number(child), state: stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) };
      })
    : [];
}

/** Our own pause program (scripts/image/pause.c), compiled as the pause image compiles it. */
describe('pause (scripts/image/pause.c)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-pause-'));
  const pause = path.join(dir, 'pause');
  beforeAll(() => {
    execFileSync('gcc', [
      '-static',
      '-Os',
      '-s',
      '-Wall',
      '-Wextra',
      '-Werror',
      '-o',
      pause,
      path.join(root, 'scripts/image/pause.c'),
    ]);
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it.each(['SIGTERM', 'SIGINT'] as const)('exits 0 on %s', async (signal) => {
    const child = spawn(pause, [], { stdio: 'ignore' });
    await sleep(200);
    expect(child.exitCode).toBeNull(); // it waits
    child.kill(signal);
    expect(await exited(child)).toBe(0);
  });

  it('refuses arguments', () => {
    expect(spawnSync(pause, ['--help']).status).toBe(2);
  });

  it("as a PID namespace's first process, reaps the orphans the kernel hands it", async () => {
    // unshare --fork: pause is PID 1 of a new PID namespace, as in a Pod's sandbox.
    const unshare = spawn('unshare', ['--pid', '--fork', pause], { stdio: 'ignore' });
    try {
      await sleep(300);
      const [inside] = children(unshare.pid!);
      expect(inside).toBeDefined();
      // Two sleeps left behind by a shell that exits at once: they become pause's children, exit, and must go.
      // stdio ignored: the sleeps would hold a pipe open, and execFileSync would wait for them too.
      const shell = ['--target', String(inside!.pid), '--pid', '--', 'sh', '-c', 'sleep 2 & sleep 3 & exit 0'];
      execFileSync('nsenter', shell, { stdio: 'ignore' });
      expect(children(inside!.pid).length).toBe(2); // the orphans are pause's now
      for (let i = 0; i < 100 && children(inside!.pid).length > 0; i++) await sleep(100);
      expect(children(inside!.pid)).toEqual([]); // no zombie left
      process.kill(inside!.pid, 'SIGTERM');
      expect(await exited(unshare)).toBe(0);
    } finally {
      if (unshare.exitCode === null) unshare.kill('SIGKILL');
    }
  });
});

/** A docker-archive tar's manifest, image config and the paths in its one layer. */
function readArchive(tar: string) {
  const read = (member: string) => execFileSync('tar', ['-xOf', tar, member], { maxBuffer: 256 * 1024 * 1024 });
  const [manifest] = JSON.parse(read('manifest.json').toString()) as {
    Config: string;
    RepoTags: string[];
    Layers: string[];
  }[];
  const config = JSON.parse(read(manifest!.Config).toString()) as {
    architecture: string;
    config: { Entrypoint?: string[]; Cmd?: string[]; User?: string };
  };
  const layer = execFileSync('tar', ['-tvf', '-'], { input: read(manifest!.Layers[0]!), maxBuffer: 64 * 1024 * 1024 });
  return { tags: manifest!.RepoTags, config, layer: layer.toString() };
}

/**
 * npm run image for the small images, in a cache of the test's own: the tars hold what the node needs, a second run
 * rebuilds nothing, and --load imports them into a real containerd (started here, all its state in the test's dir).
 */
describe('npm run image (pause, busybox)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-images-'));
  const env = { ...process.env, DURABLE_CSI_IMAGES: path.join(dir, 'cache') };
  const image = (...args: string[]) =>
    execFileSync(process.execPath, [script, ...args], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const printed = () => JSON.parse(image('--print')) as Record<string, string | null>;
  let containerd: ChildProcess | undefined;

  afterAll(async () => {
    if (containerd && containerd.exitCode === null) {
      containerd.kill('SIGTERM');
      await exited(containerd);
    }
    const mounted = fs
      .readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .filter((line) => line.includes(dir));
    expect(mounted).toEqual([]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('builds docker-archive tars named as the node expects, and --print finds them', () => {
    image('pause', 'busybox');
    const tars = printed();
    const pause = readArchive(tars[PAUSE_IMAGE]!);
    expect(pause.tags).toEqual([PAUSE_IMAGE]);
    expect(pause.config.architecture).toBe('amd64');
    expect(pause.config.config).toMatchObject({ Entrypoint: ['/pause'], User: '65535:65535' });
    expect(pause.layer).toMatch(/ pause\n/);

    const busybox = readArchive(tars[BUSYBOX_IMAGE]!);
    expect(busybox.tags).toEqual([BUSYBOX_IMAGE]);
    expect(busybox.config.config.Cmd).toEqual(['sh']);
    expect(busybox.layer).toMatch(/ bin\/sh -> \/bin\/busybox\n/);
    expect(busybox.layer).toMatch(/ etc\/passwd\n/);
    expect(Object.keys(tars)).toEqual(
      expect.arrayContaining([
        `ghcr.io/durable-csi/durable-csi:${buildVersion}`,
        'registry.k8s.io/sig-storage/csi-provisioner:v6.4.0',
        'registry.k8s.io/sig-storage/csi-resizer:v2.3.0',
      ]),
    );
  });

  it('rebuilds nothing when no input changed', () => {
    const tar = printed()[PAUSE_IMAGE]!;
    const built = fs.statSync(tar).mtimeMs;
    const again = spawnSync(process.execPath, [script, 'pause'], { env, encoding: 'utf8' });
    expect(again.status).toBe(0);
    expect(again.stderr).not.toContain('gcc');
    expect(again.stderr).not.toContain('umoci');
    expect(fs.statSync(tar).mtimeMs).toBe(built);
  });

  it('--load imports them into a given containerd, in the namespace the CRI uses', async () => {
    const state = path.join(dir, 'containerd');
    const socket = path.join(state, 'containerd.sock');
    fs.mkdirSync(state, { recursive: true });
    const config = [
      'version = 2',
      `root = "${path.join(state, 'root')}"`,
      `state = "${path.join(state, 'state')}"`,
      'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
      `[grpc]\n  address = "${socket}"`,
      `[ttrpc]\n  address = "${socket}.ttrpc"`,
    ].join('\n');
    fs.writeFileSync(path.join(state, 'config.toml'), `${config}\n`);
    containerd = spawn('containerd', ['--config', path.join(state, 'config.toml')], { stdio: 'ignore' });
    for (let i = 0; i < 100 && !fs.existsSync(socket); i++) await sleep(100);
    expect(fs.existsSync(socket)).toBe(true);

    image('pause', 'busybox', `--load=${socket}`);
    const listed = execFileSync('ctr', ['--address', socket, '--namespace', 'k8s.io', 'images', 'ls', '--quiet'], {
      encoding: 'utf8',
    });
    expect(listed.split('\n')).toEqual(expect.arrayContaining([PAUSE_IMAGE, BUSYBOX_IMAGE]));
  });
});
