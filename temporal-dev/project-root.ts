/** Moved to common/project-root.ts (production code needs it too); this path stays for the code that imports it. */
export { findProjectRoot } from '../common/project-root';
