import fs from 'node:fs';
import path from 'node:path';
import { DEPLOY } from './components';

export const README = path.join(DEPLOY, 'README.md');

interface Block {
  /** Offset of the opening fence in the README. */
  at: number;
  text: string;
}

/** Every fenced block of deploy/README.md, in order, its indentation (a list item's) removed. */
function fencedBlocks(): Block[] {
  const text = fs.readFileSync(README, 'utf8');
  const blocks: Block[] = [];
  for (const match of text.matchAll(/^( *)```[\w-]*\n([\s\S]*?)^ *```$/gm)) {
    const indent = match[1] ?? '';
    const body = (match[2] ?? '')
      .split('\n')
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join('\n');
    blocks.push({ at: match.index ?? 0, text: body });
  }
  return blocks;
}

/** The first fenced block after `<!-- marker` in deploy/README.md. */
export function snippetAfterMarker(marker: string): string {
  const at = fs.readFileSync(README, 'utf8').indexOf(`<!-- ${marker}`);
  if (at < 0) throw new Error(`deploy/README.md has no <!-- ${marker} --> block`);
  const block = fencedBlocks().find((candidate) => candidate.at > at);
  if (!block) throw new Error(`no fenced block follows <!-- ${marker}`);
  return block.text;
}

/** The fenced block of deploy/README.md that holds `line`. */
export function snippetContaining(line: string): string {
  const block = fencedBlocks().find((candidate) => candidate.text.includes(line));
  if (!block) throw new Error(`deploy/README.md has no fenced block with ${line}`);
  return block.text;
}
