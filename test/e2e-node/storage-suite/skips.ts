import fs from 'node:fs';
import type { SuiteDriver } from './run-suite';

/**
 * The one list of storage-suite specs that are not run (passed to the suite as -ginkgo.skip), each with why this
 * machine cannot have what the spec needs, or which documented decision of the driver's it contradicts. A
 * capability durable-csi lacks is declared false in the driver YAMLs instead (the suite then skips the spec itself,
 * with its own message); nothing is listed here to make a run pass. docs/storage-suite.md shows the same list.
 */
export interface SuiteSkip {
  /** A regular expression over the spec's full text. */
  spec: string;
  reason: string;
  /** Only for these drivers (all when absent). */
  drivers?: readonly SuiteDriver[];
  /** Only while this holds (always when absent): a machine-dependent limit is checked, not assumed. */
  applies?: () => boolean;
}

/** CAP_SYS_RESOURCE (24) in this process's bounding set: the kernel's ext4 online resize ioctl needs it. */
export function hostHasSysResource(): boolean {
  const line = fs.readFileSync('/proc/self/status', 'utf8').match(/^CapBnd:\s*([0-9a-f]+)$/m);
  return line?.[1] !== undefined && (BigInt(`0x${line[1]}`) & (1n << 24n)) !== 0n;
}

export const SUITE_SKIPS: readonly SuiteSkip[] = [
  {
    spec: '\\[Disruptive\\]',
    reason:
      'Disruptive specs stop and start kubelet or reboot the node over SSH (e2essh); the test node is one kubelet ' +
      'in a network namespace with no SSH, and it runs every other spec.',
  },
  {
    spec: 'provisioning should provision storage with any volume data source',
    reason:
      'It deploys hello-populator and volume-data-source-validator (registry.k8s.io/sig-storage), built from ' +
      'github.com/kubernetes-csi/lib-volume-populator and volume-data-source-validator, which the Go module proxy ' +
      'refuses (403, checked 2026-12-02): no image can be built here. durable-csi takes no part in it beyond ' +
      "provisioning the populator's claim, which the other provisioning specs cover.",
  },
  {
    spec:
      '\\(default fs\\).*(should resize volume when PVC is edited while pod is using it|' +
      'should support expansion of pvcs created for ephemeral pvcs)',
    reason:
      "Growing a mounted ext4 filesystem needs CAP_SYS_RESOURCE (the kernel's EXT4_IOC_RESIZE_FS), which this " +
      "machine's root lacks; the node agent answers FAILED_PRECONDITION saying so (loop-backend.test.ts). Skipped " +
      'only on such a host: with the capability these specs run. Offline growth (at staging) runs here.',
    drivers: ['loop-ext4'],
    applies: () => !hostHasSysResource(),
  },
  {
    spec: '\\] volumegroupsnapshottable ',
    reason:
      "Its StatefulSet's claims and the claims it restores from the group ask 1Mi, whatever the driver YAML's " +
      'SupportedSizeRange: an xfs volume is at least 300 MiB (the driver makes the claim that large, as CSI ' +
      "allows), so each member's restoreSize is 300 MiB and csi-provisioner refuses the 1Mi restores itself " +
      '("requested volume size 1048576 is less than the size 314572800 for the source snapshot"). loop ext4 ' +
      "(1 MiB at least) runs them; xfs runs the group snapshot class specs, whose claims take the driver's sizes.",
    drivers: ['loop-xfs'],
  },
];

/** The skips that hold for a driver on this machine. */
export function activeSkips(driver: SuiteDriver): SuiteSkip[] {
  return SUITE_SKIPS.filter(
    (skip) => (!skip.drivers || skip.drivers.includes(driver)) && (!skip.applies || skip.applies()),
  );
}

export function skipPattern(driver: SuiteDriver): string {
  return activeSkips(driver)
    .map((skip) => `(${skip.spec})`)
    .join('|');
}

/**
 * The suite's own skips (Skipf, with a message in the JUnit report), each allowed for a reason. Any other message
 * fails the run: a new one means a capability was lost, or the cluster lacks something a spec needs. Since
 * Kubernetes v1.37 a test suite that rejects a driver and pattern as a whole (a volume type the harness lacks, a file
 * system the class does not hold, a capability declared false for the whole suite: block and group snapshots for dir,
 * snapshot metadata, SELinux mounts, volume limits, the stress options) registers no specs for it: they are not in
 * the report at all, so only the skips decided inside a spec are listed here.
 */
export interface SelfSkip {
  message: RegExp;
  reason: string;
  /** Only for these drivers (all when absent). */
  drivers?: readonly SuiteDriver[];
}

const DECLARED_FALSE = 'A capability the driver YAML declares false (docs/storage-suite.md says why for each).';

const ONE_NODE =
  'The test cluster has one schedulable node (the suite asks for several, or for topology segments to tell ' +
  'apart): these run on three nodes in test/e2e-cluster/storage-suite.test.ts.';
/** The suite's own skips for too few nodes or topology segments: allowed on one node, a failure on three. */
export const TOO_FEW_NODES =
  /Not enough topologies in cluster|Number of available nodes|at least 2 nodes|No topology with at least/;

export const SELF_SKIPS: readonly SelfSkip[] = [
  {
    message: /does not support ROX access mode/,
    reason: `${DECLARED_FALSE} capReadOnlyMany: a restore or clone read by several nodes is a shared volume.`,
  },
  {
    message: /Driver "durable-csi\.io" does not support snapshots - skipping/,
    reason:
      'multiVolume\'s "concurrently access the volume and restored snapshot" runs only in patterns with a snapshot ' +
      'type (block, ext4, xfs); the suite skips it in its filesystem volmode pattern, which has none.',
  },
  { message: /this driver does not support multiple PVs with the same volumeHandle/, reason: DECLARED_FALSE },
  {
    message: /only supports singleNodeVolume -- skipping/,
    reason: `${DECLARED_FALSE} singleNodeVolume: a node-local volume cannot move between nodes.`,
  },
  {
    message: /Filesystem volume case should be covered by block volume case/,
    reason: 'The suite runs that check once, in its block volume pattern.',
  },
  {
    message:
      /(VolumeBindingMode immediate is not compatible with a multi-topology environment|Multiple generic ephemeral volumes with immediate binding)/,
    reason:
      'A topology driver needs WaitForFirstConsumer (every durable-csi class has it); the suite skips its ' +
      'Immediate-binding variants for such drivers.',
  },
  { message: TOO_FEW_NODES, reason: ONE_NODE },
  { message: /doesn't support RWX -- skipping/, reason: `${DECLARED_FALSE} RWX.` },
  {
    message: /Driver "durable-csi\.io" does not support filesystem resizing - skipping/,
    reason:
      'dir.yaml declares the anti-capability FSResizeFromSourceNotSupported: a dir volume has no filesystem of its ' +
      "own, so a restore asked larger than its snapshot has no filesystem to grow (df shows the pool's).",
    drivers: ['dir'],
  },
  {
    message: /has no configured VolumeAttributesClass/,
    reason: 'No mutable parameters: MODIFY_VOLUME is not advertised (docs/csi-sanity.md), so no VolumeAttributesClass.',
  },
  {
    message: /doesn't specify performance test options/,
    reason:
      'Opt-in load specs (DriverInfo PerformanceTestOptions): not declared; the soak (docs/soak.md) and the ' +
      'benchmarks (docs/performance.md) load durable-csi through its own harness.',
  },
  {
    message:
      /volume type "[^"]+" is (not )?ephemeral|Block volumes do not support mount options|Test is not valid for Block volume mode|raw block volumes cannot be read-only|skipping multiple PV mount test for block mode/,
    reason: "The suite's own rule: the spec does not apply to that pattern, whatever the driver.",
  },
];

/** Ginkgo's message for a spec the focus or -ginkgo.skip left out. */
export const NOT_SELECTED = '';

/** The reason a skipped spec's message is allowed, or undefined when nothing in the lists explains it. */
export function skipReason(message: string, driver: SuiteDriver): string | undefined {
  if (message === NOT_SELECTED) return 'not selected by the focus or the skip list';
  return SELF_SKIPS.find((skip) => (!skip.drivers || skip.drivers.includes(driver)) && skip.message.test(message))
    ?.reason;
}
