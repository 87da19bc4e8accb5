/** The workflow bundle's entry: every workflow type the controller's worker runs. */
export { createVolume } from './create-volume';
export { deleteVolume } from './delete-volume';
export { expandVolume } from './expand-volume';
export { inspectVolume } from './inspect-volume';
export { listVolumes } from './list-volumes';
export { listVolumesPage } from './list-volumes-page';
export { nodeRegistry } from './node-registry';
export { nodePresence } from './node-presence';
