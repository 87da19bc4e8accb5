/**
 * CSI Identity: who we are, what we serve, and whether this process works (both processes serve it).
 *
 * Probe is liveness, not readiness: livenessprobe turns `ready: false` into a container restart, and restarting
 * does not bring Temporal back. So Probe answers whether this process can do its own work (its worker runs, its
 * storage is open), never whether Temporal is reachable; that is readiness (the metrics server's /readyz) and
 * each call's own error (UNAVAILABLE). docs/kubernetes.md has what every probe means.
 */
export interface IdentityOptions {
  driverName: string;
  version: string;
  /** Resolves true while the process can do its work; must not depend on Temporal being reachable. */
  live: () => Promise<boolean>;
}

export function createIdentityService(options: IdentityOptions) {
  // CSI: every instance of a plugin reports the same capabilities, whichever services it serves itself.
  const services = ['CONTROLLER_SERVICE', 'VOLUME_ACCESSIBILITY_CONSTRAINTS'];
  return {
    async GetPluginInfo() {
      return { name: options.driverName, vendor_version: options.version, manifest: {} };
    },
    async GetPluginCapabilities() {
      const expansion = [{ volume_expansion: { type: 'ONLINE' } }];
      return { capabilities: [...services.map((type) => ({ service: { type } })), ...expansion] };
    },
    async Probe() {
      return { ready: { value: await options.live() } };
    },
  };
}
