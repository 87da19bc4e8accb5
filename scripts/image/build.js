'use strict';
// npm run image: builds the driver's OCI image from the package registries alone, as a docker-archive tar (what
// containerd imports) and an OCI archive (what `skopeo copy oci-archive:... docker://...` pushes to a registry), and
// the small images a real node and the tests need. Node built-ins only. Everything is cached by content under
// ~/.cache/durable-csi/images ($DURABLE_CSI_IMAGES): a second run rebuilds only what an input changed for.
//
//   npm run image                              the driver: ghcr.io/durable-csi/durable-csi:<package.json version>
//   npm run image -- pause busybox             those images (durable-csi csi-provisioner csi-resizer pause busybox)
//   npm run image -- --all                     every image
//   npm run image -- --node                    the images a real node runs (not the storage suite's own)
//   npm run image -- --all --load=SOCKET       and import them into the containerd at SOCKET (namespace k8s.io)
//   npm run image -- --print [--node]          {"<image ref>": "<tar path>"} for every image, or the node's (null:
//                                              cannot know yet, its input is missing), without building
const fs = require('fs');
const path = require('path');
const { publish, removeScratch, scratchDir } = require('./cache');
const { run, requireTool, timed } = require('./run');
const { driverImage } = require('./driver');
const { smallImages } = require('./small');

const USAGE = 'usage: npm run image -- [IMAGE...] [--all | --node] [--load=CONTAINERD_SOCKET] [--print]';

function allImages() {
  return [driverImage(), ...smallImages()];
}

function parseArgs(argv, known) {
  const options = { names: [], all: false, node: false, print: false, load: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--all') options.all = true;
    else if (arg === '--node') options.node = true;
    else if (arg === '--print') options.print = true;
    else if (arg === '--load') options.load = argv[++i];
    else if (arg.startsWith('--load=')) options.load = arg.slice('--load='.length);
    else if (arg === '-h' || arg === '--help') options.help = true;
    else if (known.includes(arg)) options.names.push(arg);
    else throw new Error(`unknown argument "${arg}" (images: ${known.join(', ')})\n${USAGE}`);
  }
  if (options.load === '') throw new Error(`--load needs containerd's socket\n${USAGE}`);
  return options;
}

function mib(bytes) {
  return `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
}

/** ctr import into the namespace kubelet's CRI uses; the images are then there for imagePullPolicy Never. */
function load(socket, image, tar, timings) {
  requireTool('ctr', 'containerd');
  timed(timings, `load into ${socket}`, () =>
    run('ctr', ['--address', socket, '--namespace', 'k8s.io', 'images', 'import', tar]),
  );
}

/** Where the OCI archive of an image's docker-archive tar goes: beside its directory (publish empties that one). */
function ociArchivePath(tar) {
  return path.join(path.dirname(path.dirname(tar)), `${path.basename(path.dirname(tar))}-oci`, path.basename(tar));
}

/**
 * The image as an OCI archive, copied from its docker-archive by skopeo (the same layers and config; cached with it).
 * Its one image is named by its tag, as OCI layouts name theirs.
 */
function ociArchive(ref, tar, timings) {
  const out = ociArchivePath(tar);
  if (fs.existsSync(out)) {
    timings.push({ label: 'oci archive', seconds: 0, cached: true });
    return out;
  }
  requireTool('skopeo', 'skopeo');
  timed(timings, 'oci archive', () => {
    const scratch = scratchDir('oci');
    try {
      const policy = path.join(scratch, 'policy.json');
      fs.writeFileSync(policy, `${JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] })}\n`);
      const built = path.join(scratch, 'image.tar');
      const tag = ref.slice(ref.lastIndexOf(':') + 1);
      run('skopeo', ['--policy', policy, 'copy', '--quiet', `docker-archive:${tar}`, `oci-archive:${built}:${tag}`]);
      publish(built, out);
    } finally {
      removeScratch(scratch);
    }
  });
  return out;
}

function report(name, ref, tar, timings, oci) {
  console.error(`image: ${name} ${ref}`);
  for (const { label, seconds, cached } of timings)
    console.error(`image:   ${label.padEnd(38)} ${cached ? 'cached' : `${seconds.toFixed(1)} s`}`);
  console.error(`image:   ${'tar'.padEnd(38)} ${tar} (${mib(fs.statSync(tar).size)})`);
  if (!oci) return;
  console.error(`image:   ${'oci archive'.padEnd(38)} ${oci} (${mib(fs.statSync(oci).size)})`);
  // skopeo compresses the layers on the way to a registry; --dest-creds or `skopeo login` for one that asks.
  const repository = ref.slice(ref.indexOf('/') + 1, ref.lastIndexOf(':'));
  const tag = ref.slice(ref.lastIndexOf(':') + 1);
  console.error(`image: push it: skopeo copy oci-archive:${oci} docker://REGISTRY/${repository}:${tag}`);
}

function main(argv) {
  const images = allImages();
  const options = parseArgs(
    argv,
    images.map((image) => image.name),
  );
  if (options.help) return console.log(USAGE);
  // The storage suite's own images (agnhost needs its Go build) are left out of a real node's set: the suites that
  // need only the node run while the storage suite builds (scripts/background-build.js).
  const nodeImages = images.filter((image) => !image.suiteOnly);
  if (options.print) {
    const paths = Object.fromEntries((options.node ? nodeImages : images).map((image) => [image.ref, image.tar()]));
    return process.stdout.write(`${JSON.stringify(paths, null, 2)}\n`);
  }
  const wanted = options.all
    ? images
    : options.node
      ? nodeImages
      : images.filter((image) => (options.names.length ? options.names : ['durable-csi']).includes(image.name));
  const started = Date.now();
  for (const image of wanted) {
    const timings = [];
    const tar = image.build(timings);
    // The driver's image is the one pushed to a registry (deploy/README.md); the small ones are for test nodes.
    const oci = image.name === 'durable-csi' ? ociArchive(image.ref, tar, timings) : undefined;
    if (options.load) load(options.load, image, tar, timings);
    report(image.name, image.ref, tar, timings, oci);
  }
  console.error(`image: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

module.exports = { allImages, ociArchivePath, parseArgs };

if (require.main === module) {
  try {
    main(process.argv.slice(2));
  } catch (error) {
    console.error(`image: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
