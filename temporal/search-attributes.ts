import type { SearchAttributeType } from '@temporalio/common';
import { SEARCH_ATTRIBUTE_KEYS } from '../common/names';

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

/**
 * The custom search attributes durable-csi registers, by name and CLI type: every key clients and workflows share
 * (common/names.ts, the one list), so the dev server, the controller's start check, the registration commands and
 * the production-style test server never disagree with the workflows.
 */
export const SEARCH_ATTRIBUTES: Readonly<Record<string, CliSearchAttributeType>> = Object.fromEntries(
  SEARCH_ATTRIBUTE_KEYS.map((key) => [key.name, CLI_TYPE[key.type]]),
);
