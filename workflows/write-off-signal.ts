import { defineSignal } from '@temporalio/workflow';
import type { WrittenOffVolume } from '../node-records/types';

/**
 * To a node's record (workflows/node-presence.ts): a deletion ended with the node forgotten, so the volume is
 * to be deleted on the node when it returns with that pool. Its own file: activities send it, and the record
 * imports activity types.
 */
export const writeOffVolumeSignal = defineSignal<[WrittenOffVolume]>('writeOffVolume');
