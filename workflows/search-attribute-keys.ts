import { defineSearchAttributeKey } from '@temporalio/common';

/** Typed keys for the search attributes registered by temporal-dev (and by operators on a real cluster). */
export const VolumeIdKey = defineSearchAttributeKey('DurableCsiVolumeId', 'KEYWORD');
export const VolumeNameKey = defineSearchAttributeKey('DurableCsiVolumeName', 'KEYWORD');
export const NodeIdKey = defineSearchAttributeKey('DurableCsiNodeId', 'KEYWORD');
export const OperationKey = defineSearchAttributeKey('DurableCsiOperation', 'KEYWORD');
export const PhaseKey = defineSearchAttributeKey('DurableCsiPhase', 'KEYWORD');
export const WaitingSinceKey = defineSearchAttributeKey('DurableCsiWaitingSince', 'DATETIME');

export type Phase = 'placing' | 'waiting-for-node' | 'running' | 'done' | 'failed';
/** The phase of a node record (workflows/node-presence.ts), whose DurableCsiOperation is "node". */
export type NodePhase = 'live' | 'offline' | 'forgotten';
