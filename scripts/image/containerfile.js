'use strict';
// Reads deploy/Containerfile back into the terms of deploy/image.json, so a test can say where the two differ
// (the Containerfile is the recipe for machines that reach a registry; scripts/image builds the same image here).
const { nodeBaseImage } = require('./spec');

/** The instructions, continuation lines joined and comments dropped: [{ op, args }]. */
function instructions(text) {
  const out = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!pending && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue; // a comment inside a continued instruction
    pending += (pending ? ' ' : '') + line.replace(/\\$/, '').trim();
    if (line.endsWith('\\')) continue;
    const [, op, args] = /^(\S+)\s*(.*)$/.exec(pending);
    out.push({ op: op.toUpperCase(), args });
    pending = '';
  }
  return out;
}

/** FROM lines split the file into stages; the last one is the image. */
function stages(list) {
  const out = [];
  for (const instruction of list) {
    if (instruction.op === 'FROM') out.push({ from: instruction.args.split(/\s+/)[0], body: [] });
    else if (out.length) out[out.length - 1].body.push(instruction);
  }
  return out;
}

/** ENV a=b c=d (the key=value form; quotes are not used in our file and not parsed). */
function envPairs(args) {
  const env = {};
  for (const pair of args.split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf('=');
    if (at <= 0 || /["']/.test(pair)) throw new Error(`ENV ${args}: write ENV as unquoted key=value pairs`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return env;
}

/** The packages of every `apt-get install` in a RUN. */
function aptPackages(run) {
  const packages = [];
  for (const command of run.split(/&&|;/)) {
    const words = command.trim().split(/\s+/);
    const at = words.indexOf('install');
    if (words[0] !== 'apt-get' || at < 0) continue;
    packages.push(...words.slice(at + 1).filter((word) => !word.startsWith('-')));
  }
  return packages;
}

/** The symlinks of every `ln -s TARGET LINK` in a RUN: { LINK: TARGET }. */
function symlinks(run) {
  const links = {};
  for (const command of run.split(/&&|;/)) {
    const words = command.trim().split(/\s+/);
    if (words[0] === 'ln' && words.includes('-s')) {
      const [target, link] = words.slice(1).filter((word) => !word.startsWith('-'));
      links[link] = target;
    }
  }
  return links;
}

/** The paths every `rm -rf PATH` in a RUN removes (relative to WORKDIR, as image.json "omit" says them). */
function removals(run) {
  const paths = [];
  for (const command of run.split(/&&|;/)) {
    const words = command.trim().split(/\s+/);
    if (words[0] === 'rm') paths.push(...words.slice(1).filter((word) => !word.startsWith('-')));
  }
  return paths;
}

/** What the Containerfile's final image is made of, in deploy/image.json's terms. */
function describe(text) {
  const all = stages(instructions(text));
  if (all.length === 0) throw new Error('no FROM');
  const image = all[all.length - 1];
  const found = {
    bases: all.map((s) => s.from),
    packages: [],
    env: {},
    links: {},
    omit: [],
    user: undefined,
    workdir: undefined,
  };
  for (const { op, args } of image.body) {
    if (op === 'RUN') {
      found.packages.push(...aptPackages(args));
      Object.assign(found.links, symlinks(args));
      found.omit.push(...removals(args).filter((removed) => !removed.startsWith('/')));
    } else if (op === 'ENV') Object.assign(found.env, envPairs(args));
    else if (op === 'ENTRYPOINT') found.entrypoint = JSON.parse(args);
    else if (op === 'USER') found.user = args;
    else if (op === 'WORKDIR') found.workdir = args;
  }
  return found;
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const sortedEntries = (object) => Object.fromEntries(Object.entries(object).sort(([a], [b]) => a.localeCompare(b)));

/** Every way the Containerfile differs from the spec, as sentences; [] when they agree. */
function drift(spec, text) {
  const found = describe(text);
  const problems = [];
  const base = nodeBaseImage(spec);
  for (const from of found.bases)
    if (from !== base) problems.push(`FROM ${from}: every stage builds on ${base} (deploy/image.json node and suite)`);
  const missing = spec.debian.packages.filter((p) => !found.packages.includes(p));
  const extra = found.packages.filter((p) => !spec.debian.packages.includes(p));
  if (missing.length) problems.push(`apt-get install lacks ${missing.join(', ')}`);
  if (extra.length) problems.push(`apt-get install has ${extra.join(', ')}, which deploy/image.json does not list`);
  if (!same(sortedEntries(found.env), sortedEntries(spec.env)))
    problems.push(
      `ENV is ${JSON.stringify(sortedEntries(found.env))}, deploy/image.json says ${JSON.stringify(sortedEntries(spec.env))}`,
    );
  if (!same(found.entrypoint, spec.entrypoint))
    problems.push(
      `ENTRYPOINT is ${JSON.stringify(found.entrypoint)}, deploy/image.json says ${JSON.stringify(spec.entrypoint)}`,
    );
  if (found.user !== spec.user) problems.push(`USER is ${found.user}, deploy/image.json says ${spec.user}`);
  if (found.workdir !== spec.workdir)
    problems.push(`WORKDIR is ${found.workdir}, deploy/image.json says ${spec.workdir}`);
  if (!same(sortedEntries(found.links), sortedEntries(spec.links)))
    problems.push(`ln -s makes ${JSON.stringify(found.links)}, deploy/image.json says ${JSON.stringify(spec.links)}`);
  if (!same([...found.omit].sort(), [...(spec.omit || [])].sort()))
    problems.push(`rm -rf removes ${JSON.stringify(found.omit)}, deploy/image.json omits ${JSON.stringify(spec.omit)}`);
  return problems;
}

module.exports = { describe, drift, instructions };
