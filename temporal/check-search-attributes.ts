import type { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from './search-attributes';
import type { CliSearchAttributeType } from './search-attributes';

// Wire values of temporal.api.enums.v1.IndexedValueType; @temporalio/proto, which defines the enum, is not a direct
// dependency.
const INDEXED_VALUE_TYPE: Record<CliSearchAttributeType, number> = {
  Text: 1,
  Keyword: 2,
  Int: 3,
  Double: 4,
  Bool: 5,
  Datetime: 6,
  KeywordList: 7,
};

/**
 * Names of durable-csi's search attributes that `namespace` lacks (or has with another type),
 * so the controller can fail at start with the exact commands to run instead of on first upsert.
 */
export async function missingSearchAttributes(
  connection: Pick<Connection, 'operatorService'>,
  namespace: string,
): Promise<string[]> {
  const response = await connection.operatorService.listSearchAttributes({ namespace });
  const registered: Record<string, unknown> = response.customAttributes ?? {};
  return Object.entries(SEARCH_ATTRIBUTES)
    .filter(([name, type]) => registered[name] !== INDEXED_VALUE_TYPE[type])
    .map(([name]) => name);
}
