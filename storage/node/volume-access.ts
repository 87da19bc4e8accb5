/** What differs between backends on the node side: how a volume is made usable and how its mounts look. */
import type { AccessType } from '../pool/backend';
import type { MountMatcher } from '../host/mounts';
import type { PoolLayout } from '../pool/pool-layout';
import type { StoredRecord } from '../pool/records';

/** A volume as the node side sees it; a key alone (a directory left without a record) is enough to find it. */
export type VolumeRef = Pick<StoredRecord, 'key' | 'accessType' | 'fsType'>;

export interface Attachment {
  /** What stage mounts at the staging path; undefined for block volumes (nothing is mounted there). */
  mount?: { kind: 'bind'; source: string } | { kind: 'filesystem'; device: string; fsType: string };
  /** Block volumes: the device that publish binds onto the target file. */
  device?: string;
  /** Recognises every mount that shows this volume (see mounts.ts). */
  matchers: MountMatcher[];
  /** True when this call attached it (a loop device that was not there). */
  fresh: boolean;
}

export interface VolumeAccess {
  readonly layout: PoolLayout;
  /** InvalidArgument when the volume cannot be used this way (block on dir, mount of a block volume, ...). */
  checkAccess(volume: VolumeRef, accessType: AccessType, fsType: string): void;
  /** Makes the volume usable (loop: attaches a device unless one is attached); idempotent. */
  attach(volume: VolumeRef): Promise<Attachment>;
  /** The current attachment without attaching; undefined when there is none (then nothing can show it). */
  find(volume: VolumeRef): Promise<Attachment | undefined>;
  /** Undoes attach (loop: detaches every device of the image); idempotent. */
  detach(volume: VolumeRef): Promise<void>;
  /** Once its filesystem is mounted at the staging path (loop xfs: grown to its device, which only a mount allows). */
  afterMount?(attachment: Attachment, mountPoint: string): Promise<void>;
  /** Raw block only: a device the kernel keeps read-only, for a read-only publish (absent: refused). */
  readOnlyDevice?(volume: VolumeRef): Promise<string>;
  /** After an unpublish: lets go of read-only devices nothing binds any more. */
  releaseUnused?(volume: VolumeRef): Promise<void>;
}
