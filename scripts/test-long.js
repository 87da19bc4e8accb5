'use strict';
// `npm run test:long`: what does not fit `npm test`'s budget on a fresh machine, run before a stop that touches what
// it covers (docs/testing.md, "The long runs"): the long soak (3,000 operations, every fault kind, snapshots, the
// version-skew baseline), the long soak again on the production-style Temporal, and Kubernetes' storage suite in
// full (every spec for every class, where `npm test` runs the subset that matters for each), and the three-node
// cluster's scenarios (`npm run test:cluster`: a node lost, the upgrade from the newest release). Each step's time and
// result are printed and written to test-artifacts/long/summary.json; a failed step fails the command but the
// others still run, so one run says everything.
//
//   npm run test:long                         every step
//   npm run test:long -- --only soak          some steps (soak, soak-prod, storage-suite, cluster)
//   npm run test:long -- --seed 1234          the soaks' seed (default: a fresh one, printed)
//   npm run test:long -- --ops 1000           the soaks' operations (default 3000)
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
const OUT = path.join(root, 'test-artifacts', 'long');

function parseArgs(argv) {
  const options = { only: undefined, seed: Math.floor(Math.random() * 2 ** 31), ops: 3000 };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=');
    const value = () => inline ?? argv[++i];
    if (flag === '--only') options.only = value().split(',');
    else if (flag === '--seed') options.seed = Number(value());
    else if (flag === '--ops') options.ops = Number(value());
    else throw new Error(`unknown argument ${argv[i]} (--only STEPS, --seed N, --ops N)`);
  }
  if (!Number.isInteger(options.seed) || !Number.isInteger(options.ops) || options.ops < 1)
    throw new Error('--seed and --ops take whole numbers');
  return options;
}

function steps(options) {
  const soak = (temporal) => [
    path.join(root, 'dist', 'test', 'soak', 'main.js'),
    '--ops',
    String(options.ops),
    '--seed',
    String(options.seed),
    '--temporal',
    temporal,
    '--report',
    path.join(OUT, `soak-${temporal}.json`),
  ];
  return [
    { name: 'soak', command: process.execPath, args: soak('dev') },
    { name: 'soak-prod', command: process.execPath, args: soak('prod') },
    {
      name: 'storage-suite',
      command: process.execPath,
      args: [jest, '--runInBand', 'test/e2e-node/storage-suite/', '--selectProjects', 'dev'],
      env: { DURABLE_CSI_STORAGE_SUITE: 'full', DURABLE_CSI_TIMING_PHASE: 'storage-suite-full' },
    },
    {
      name: 'cluster',
      command: process.execPath,
      args: [jest, '--runInBand', 'test/e2e-cluster/', '--selectProjects', 'dev'],
      env: { DURABLE_CSI_TIMING_PHASE: 'cluster' },
    },
  ];
}

function run(step) {
  console.error(`test-long: ${step.name}: ${path.basename(step.command)} ${step.args.join(' ')}`);
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(step.command, step.args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...step.env } });
    const done = (ok, why) => resolve({ name: step.name, ok, why, seconds: Math.round((Date.now() - started) / 1000) });
    child.on('error', (error) => done(false, error.message));
    child.on('exit', (code, signal) => done(code === 0, signal || `exit ${code}`));
  });
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const chosen = steps(options).filter((step) => !options.only || options.only.includes(step.name));
  const unknown = (options.only || []).filter((name) => !steps(options).some((step) => step.name === name));
  if (unknown.length) throw new Error(`no step ${unknown.join(', ')} (steps: ${steps(options).map((s) => s.name)})`);
  fs.mkdirSync(OUT, { recursive: true });
  console.error(`test-long: seed ${options.seed}, ${options.ops} operations per soak`);
  const results = [];
  for (const step of chosen) results.push(await run(step));
  const summary = { seed: options.seed, ops: options.ops, results };
  fs.writeFileSync(path.join(OUT, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  for (const result of results)
    console.error(
      `test-long: ${result.ok ? 'ok    ' : 'FAILED'} ${result.name} (${result.seconds} s)${result.ok ? '' : `: ${result.why}`}`,
    );
  process.exit(results.every((result) => result.ok) ? 0 : 1);
}

main().catch((error) => {
  console.error(`test-long: ${error.message}`);
  process.exit(2);
});
