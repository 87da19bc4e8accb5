/**
 * What grew between two heap snapshots of one thread: live objects grouped by constructor (as DevTools' comparison
 * view groups them), counts and shallow sizes, largest growth first. `node dist/test/bench/heap-diff.js a b`.
 */
import fs from 'node:fs';

export interface HeapGroup {
  count: number;
  /** Shallow size, bytes. */
  size: number;
}

interface RawSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** The group a node falls in: an object by its constructor, a closure by its function's name, else its V8 type. */
function groupOf(type: string, name: string): string {
  if (type === 'object') return name;
  if (type === 'closure') return `${name || '(anonymous)'}()`;
  if (type === 'native') return `native ${name}`;
  if (type === 'array' || type === 'hidden' || type === 'object shape') return `(${type}) ${name}`;
  return `(${type})`;
}

/** Live objects of a heap snapshot file, by group. */
export function summarizeSnapshot(file: string): Map<string, HeapGroup> {
  const raw = JSON.parse(fs.readFileSync(file, 'utf8')) as RawSnapshot;
  const fields = raw.snapshot.meta.node_fields;
  const types = raw.snapshot.meta.node_types[0];
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((field) => fields.indexOf(field)) as [
    number,
    number,
    number,
  ];
  const groups = new Map<string, HeapGroup>();
  for (let at = 0; at < raw.nodes.length; at += width) {
    const type = types[raw.nodes[at + typeAt] ?? 0] ?? '?';
    const key = groupOf(type, raw.strings[raw.nodes[at + nameAt] ?? 0] ?? '');
    const group = groups.get(key) ?? { count: 0, size: 0 };
    group.count++;
    group.size += raw.nodes[at + sizeAt] ?? 0;
    groups.set(key, group);
  }
  return groups;
}

export interface HeapGrowth extends HeapGroup {
  group: string;
}

/** Each group's growth from `before` to `after` (negative when it shrank), largest growth in bytes first. */
export function diffSummaries(before: Map<string, HeapGroup>, after: Map<string, HeapGroup>): HeapGrowth[] {
  const keys = new Set([...before.keys(), ...after.keys()]);
  return [...keys]
    .map((group) => ({
      group,
      count: (after.get(group)?.count ?? 0) - (before.get(group)?.count ?? 0),
      size: (after.get(group)?.size ?? 0) - (before.get(group)?.size ?? 0),
    }))
    .sort((a, b) => b.size - a.size || b.count - a.count);
}

/** The `top` largest growths as text lines, with the totals. */
export function formatGrowth(before: Map<string, HeapGroup>, after: Map<string, HeapGroup>, top = 15): string[] {
  const total = (groups: Map<string, HeapGroup>) => [...groups.values()].reduce((sum, group) => sum + group.size, 0);
  const kB = (bytes: number) => `${bytes >= 0 ? '+' : ''}${(bytes / 1024).toFixed(1)} kB`;
  return [
    `live heap ${(total(before) / 1e6).toFixed(1)} -> ${(total(after) / 1e6).toFixed(1)} MB`,
    ...diffSummaries(before, after)
      .slice(0, top)
      .map(
        (growth) => `  ${kB(growth.size).padStart(12)} ${String(growth.count).padStart(8)} objects  ${growth.group}`,
      ),
  ];
}

if (require.main === module) {
  const [before, after] = process.argv.slice(2);
  if (!before || !after) {
    process.stderr.write('usage: heap-diff <before.heapsnapshot> <after.heapsnapshot>\n');
    process.exit(2);
  }
  process.stdout.write(`${formatGrowth(summarizeSnapshot(before), summarizeSnapshot(after), 30).join('\n')}\n`);
}
