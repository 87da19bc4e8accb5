import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../common/project-root';

export interface K8sTools {
  etcd: string;
  'kube-apiserver': string;
  'kube-controller-manager': string;
  kubectl: string;
  kubelet: string;
  'kube-scheduler': string;
  'csi-provisioner': string;
  'csi-resizer': string;
  'csi-snapshotter': string;
  /** external-snapshotter's cluster-wide controller: a cluster prerequisite of deploy/components/snapshots. */
  'snapshot-controller': string;
  /** The snapshot and group snapshot CRDs (files of external-snapshotter's client module, copied by the installer). */
  'volumesnapshotclasses-crd': string;
  'volumesnapshotcontents-crd': string;
  'volumesnapshots-crd': string;
  'volumegroupsnapshotclasses-crd': string;
  'volumegroupsnapshotcontents-crd': string;
  'volumegroupsnapshots-crd': string;
  /** Kubernetes' external storage suite (test/e2e-node/storage-suite) and the binary of its agnhost image. */
  // Ginkgo's CLI runs a precompiled suite only by its .test name.
  'e2e-storage.test': string;
  agnhost: string;
  /** Ginkgo's CLI: runs the suite's binary in parallel processes. */
  ginkgo: string;
}

/** The sets of scripts/install-k8s-tools.js a control plane with the sidecars needs (no storage suite). */
export const CONTROL_PLANE_SETS = ['kubernetes', 'sidecars'];

/**
 * The binaries (and files: the snapshot CRDs) scripts/install-k8s-tools.js built (npm test builds them in the background and runs these suites
 * once they are there). A missing one fails the e2e with the command that builds it: the test is never skipped.
 * With `sets`, only those sets' binaries are looked for (and only their fields are set).
 */
export function k8sTools(sets?: string[]): K8sTools {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const installer = require(path.join(findProjectRoot(), 'scripts', 'install-k8s-tools.js')) as {
    binaries(sets?: string[]): Record<string, string>;
    files(sets?: string[]): Record<string, string>;
  };
  const binaries = { ...installer.binaries(sets), ...installer.files(sets) };
  const missing = Object.entries(binaries).filter(([, file]) => !fs.existsSync(file));
  if (missing.length > 0)
    throw new Error(
      `Kubernetes binaries missing: ${missing.map(([name, file]) => `${name} (${file})`).join(', ')}.\n` +
        'Build them (about 20 minutes cold, cached by version afterwards): node scripts/install-k8s-tools.js',
    );
  return binaries as unknown as K8sTools;
}
