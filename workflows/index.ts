/** The workflow bundle's entry: every workflow type the controller's worker runs. */
export { createSnapshot } from './create-snapshot';
export { createVolume } from './create-volume';
export { deleteSnapshot, deleteVolume } from './node-work';
export { expandVolume } from './expand-volume';
export { inspectVolume } from './inspect-volume';
export { listSnapshotsPage, listTransfersPage, listVolumesPage } from './listing';
export { nodePresence } from './node-presence';
export { createVolumeGroupSnapshot, deleteVolumeGroupSnapshot } from './group-snapshots';
export { moveSnapshot, moveVolume } from './move-volume';
