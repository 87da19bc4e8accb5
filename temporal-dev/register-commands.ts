import { SEARCH_ATTRIBUTES } from './search-attributes';
import type { SearchAttributeName } from './search-attributes';

/** `temporal operator search-attribute create` lines registering durable-csi's attributes on a real cluster. */
export function searchAttributeCreateCommands(
  namespace: string,
  names: readonly string[] = Object.keys(SEARCH_ATTRIBUTES),
): string[] {
  return names
    .filter((name): name is SearchAttributeName => name in SEARCH_ATTRIBUTES)
    .map(
      (name) =>
        `temporal operator search-attribute create --namespace ${namespace} --name ${name} --type ${SEARCH_ATTRIBUTES[name]}`,
    );
}
