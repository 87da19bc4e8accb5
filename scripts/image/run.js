'use strict';
// Running the image tools: every command is printed, and one that fails stops the build with what it said.
const { spawnSync } = require('child_process');

/** Runs a command; returns its stdout when `capture`, else lets it print. Throws on any failure. */
function run(command, args, options = {}) {
  if (!options.quiet) console.error(`image: $ ${command} ${args.join(' ')}`);
  const result = spawnSync(command, args, {
    cwd: options.cwd,
    env: options.env || process.env,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    stdio: ['ignore', options.capture ? 'pipe' : 'inherit', options.capture ? 'pipe' : 'inherit'],
  });
  if (result.error) throw new Error(`could not run ${command}: ${result.error.message}`);
  if (result.status !== 0) {
    const said = options.capture ? `\n${(result.stderr || '').trim()}` : '';
    throw new Error(`\`${command} ${args.join(' ')}\` exited with ${result.signal || `code ${result.status}`}${said}`);
  }
  return options.capture ? result.stdout : '';
}

/** A tool the build needs, with the Debian package that has it (the failure says what to install). */
function requireTool(command, debianPackage) {
  const probe = spawnSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' });
  if (probe.status !== 0) throw new Error(`${command} is missing: install Debian's ${debianPackage} (.ci/run does)`);
}

/** Seconds a step took, and what it returns. */
function timed(timings, label, step) {
  const started = process.hrtime.bigint();
  const value = step();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  timings.push({ label, seconds, cached: Boolean(value && value.cached) });
  return value;
}

module.exports = { requireTool, run, timed };
