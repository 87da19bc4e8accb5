import type { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from './search-attributes';
import type { CliSearchAttributeType, SearchAttributeName } from './search-attributes';

// Wire values of temporal.api.enums.v1.IndexedValueType (INDEXED_VALUE_TYPE_KEYWORD = 2, _DATETIME = 6);
// @temporalio/proto, which defines the enum, is not a direct dependency.
const INDEXED_VALUE_TYPE: Record<CliSearchAttributeType, number> = { Keyword: 2, Datetime: 6 };

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
  return (Object.keys(SEARCH_ATTRIBUTES) as SearchAttributeName[]).filter(
    (name) => registered[name] !== INDEXED_VALUE_TYPE[SEARCH_ATTRIBUTES[name]],
  );
}
