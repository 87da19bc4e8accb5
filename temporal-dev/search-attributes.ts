/**
 * The custom search attributes durable-csi registers, by name and Temporal type.
 * Kept free of Node built-ins so workflow code may import it.
 */
export const SEARCH_ATTRIBUTES = {
  DurableCsiVolumeId: 'Keyword',
  DurableCsiVolumeName: 'Keyword',
  DurableCsiNodeId: 'Keyword',
  DurableCsiOperation: 'Keyword',
  DurableCsiPhase: 'Keyword',
  DurableCsiWaitingSince: 'Datetime',
} as const;

export type SearchAttributeName = keyof typeof SEARCH_ATTRIBUTES;
/** Type names as the Temporal CLI spells them (`--type`, `--search-attribute K=V`). */
export type CliSearchAttributeType = (typeof SEARCH_ATTRIBUTES)[SearchAttributeName];
