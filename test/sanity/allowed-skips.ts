import type { SanityConfigName } from './configs';

/**
 * csi-sanity specs that may be skipped, each with the reason the skip is right for durable-csi. A skip is matched
 * by the message csi-sanity passes to Skip() (as it appears in the JUnit report, without Ginkgo's "skipped - "
 * prefix) and by configuration. Any other skip fails the test: a new skip means a capability was lost or a spec
 * never ran. docs/csi-sanity.md lists the same entries; keep the two in step.
 */
export interface AllowedSkip {
  message: string;
  /** The configurations in which the skip is expected; 'all' for every one. */
  configs: readonly SanityConfigName[] | 'all';
  reason: string;
}

const NO_ATTACH =
  'No attach step: a node-local volume is usable only on the node that holds it, so PUBLISH_UNPUBLISH_VOLUME is ' +
  'not advertised (CSIDriver attachRequired: false) and kubelet goes straight to the node RPCs.';
const NO_MODIFY =
  'No mutable parameters (VolumeAttributesClass): neither backend has a property to change after creation; ' +
  'MODIFY_VOLUME is not advertised.';

export const ALLOWED_SKIPS: readonly AllowedSkip[] = [
  {
    message: 'SNAPSHOT_ACCESSIBILITY_CONSTRAINTS not supported',
    configs: 'all',
    reason:
      'Not advertised: a snapshot is on its source volume node, and a volume made from it is placed there ' +
      '(docs/snapshots.md); CreateSnapshot takes no accessibility requirements.',
  },
  { message: 'ControllerPublishVolume not supported', configs: 'all', reason: NO_ATTACH },
  { message: 'ControllerUnpublishVolume not supported', configs: 'all', reason: NO_ATTACH },
  { message: 'Controller Publish, UnpublishVolume not supported', configs: 'all', reason: NO_ATTACH },
  { message: 'Modify volume not supported', configs: 'all', reason: NO_MODIFY },
  { message: 'Modify Volume not supported', configs: 'all', reason: NO_MODIFY },
  { message: 'ControllerModifyVolume not supported', configs: 'all', reason: NO_MODIFY },
  {
    message: 'Service does not have single node multi writer capability',
    configs: 'all',
    reason:
      'SINGLE_NODE_MULTI_WRITER is not advertised: without it Kubernetes sends ReadWriteOncePod as ' +
      'SINGLE_NODE_WRITER and enforces the single pod itself (scheduler), so the node need not refuse a second ' +
      'target path.',
  },
];

/** Specs csi-sanity itself declares pending (XIt); they never run against any driver. */
export interface AllowedPending {
  spec: string;
  reason: string;
}

export const ALLOWED_PENDING: readonly AllowedPending[] = [
  {
    spec:
      '[It] Controller Service [Controller Server] ListVolumes pagination should detect volumes added between pages ' +
      'and accept tokens when the last volume from a page is deleted',
    reason: 'Disabled (XIt) in csi-sanity v5.6.0 itself.',
  },
];

export function allowedSkip(config: SanityConfigName, message: string): AllowedSkip | undefined {
  return ALLOWED_SKIPS.find(
    (entry) => entry.message === message && (entry.configs === 'all' || entry.configs.includes(config)),
  );
}

export function allowedPending(spec: string): AllowedPending | undefined {
  return ALLOWED_PENDING.find((entry) => entry.spec === spec);
}
