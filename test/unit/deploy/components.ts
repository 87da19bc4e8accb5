/**
 * A kustomize Component's inline JSON patches (RFC 6902 `add`, `replace` and `test`, what deploy/ uses) applied to
 * the base objects they target, so the unit tests judge what an overlay with the component renders. Whether
 * kustomize and the API server agree is the e2e's (test/e2e-k8s applies it).
 */
import { load as loadYaml, loadAll as loadAllYaml } from 'js-yaml';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../../common/project-root';

export const DEPLOY = path.join(findProjectRoot(), 'deploy');

interface PatchOp {
  op: string;
  path: string;
  value?: unknown;
}
interface Component {
  resources?: string[];
  /** Without a target: a strategic merge patch naming its object (deploy/ uses them for `$patch: delete` only). */
  patches?: { target?: { kind: string; name: string }; patch: string }[];
}
interface KubeObject {
  kind?: string;
  metadata?: { name?: string };
}

export function loadDeploy<T>(file: string): T[] {
  return loadAllYaml(fs.readFileSync(path.join(DEPLOY, file), 'utf8')) as T[];
}

function readComponent(name: string): Component {
  return loadYaml(fs.readFileSync(path.join(DEPLOY, 'components', name, 'kustomization.yaml'), 'utf8')) as Component;
}

/** The component's own resources (its files), as loaded objects. */
export function componentResources<T>(name: string): T[] {
  return (readComponent(name).resources ?? []).flatMap((file) => loadDeploy<T>(path.join('components', name, file)));
}

/** The component's patches as written. */
export function componentPatches(name: string): NonNullable<Component['patches']> {
  return readComponent(name).patches ?? [];
}

/** A copy of `object` with every JSON patch of the component that targets its kind and name applied. */
export function withComponent<T extends KubeObject>(object: T, name: string): T {
  const copy = structuredClone(object);
  for (const { target, patch } of componentPatches(name)) {
    if (!target || target.kind !== object.kind || target.name !== object.metadata?.name) continue;
    applyPatch(copy, loadYaml(patch) as PatchOp[]);
  }
  return copy;
}

/** RFC 6902 `test`, `add` and `replace` operations applied to `document` in place; a failed `test` throws. */
export function applyPatch(document: unknown, ops: PatchOp[]): void {
  for (const op of ops) apply(document, op);
}

function apply(document: unknown, { op, path: pointer, value }: PatchOp): void {
  const keys = pointer.split('/').slice(1);
  const last = keys.pop();
  let parent = document as Record<string, unknown>;
  for (const key of keys) {
    const next = Array.isArray(parent) ? parent[Number(key)] : parent[key];
    if (next === undefined || next === null) throw new Error(`${pointer}: no ${key}`);
    parent = next as Record<string, unknown>;
  }
  if (last === undefined) throw new Error(`${pointer}: empty path`);
  if (op === 'test') {
    const found = Array.isArray(parent) ? parent[Number(last)] : parent[last];
    if (JSON.stringify(found) !== JSON.stringify(value))
      throw new Error(`test ${pointer}: ${JSON.stringify(found)}, not ${JSON.stringify(value)}`);
    return;
  }
  if (Array.isArray(parent)) {
    const index = last === '-' ? parent.length : Number(last);
    if (op === 'add') parent.splice(index, 0, value);
    else if (op === 'replace' && index < parent.length) parent[index] = value;
    else throw new Error(`${op} ${pointer}: not supported here`);
  } else if (op === 'add' || (op === 'replace' && last in parent)) parent[last] = value;
  else throw new Error(`${op} ${pointer}: not supported here`);
}
