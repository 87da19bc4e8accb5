import type { SearchAttributeType } from '@temporalio/common';
import * as keys from '../workflows/search-attribute-keys';

/** Type names as the Temporal CLI spells them (`--type`, `--search-attribute K=V`). */
const CLI_TYPE = {
  TEXT: 'Text',
  KEYWORD: 'Keyword',
  INT: 'Int',
  DOUBLE: 'Double',
  BOOL: 'Bool',
  DATETIME: 'Datetime',
  KEYWORD_LIST: 'KeywordList',
} as const satisfies Record<SearchAttributeType, string>;

export type CliSearchAttributeType = (typeof CLI_TYPE)[SearchAttributeType];

function isKey(value: unknown): value is { name: string; type: SearchAttributeType } {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { name?: unknown }).name === 'string' &&
    ((value as { type?: unknown }).type as string) in CLI_TYPE
  );
}

/**
 * The custom search attributes durable-csi registers, by name and CLI type: every key the workflows define in
 * workflows/search-attribute-keys.ts (the one list), so the dev server, the controller's start check, the
 * registration commands and the production-style test server never disagree with the workflows.
 */
export const SEARCH_ATTRIBUTES: Readonly<Record<string, CliSearchAttributeType>> = Object.fromEntries(
  Object.values(keys)
    .filter(isKey)
    .map((key) => [key.name, CLI_TYPE[key.type]]),
);
