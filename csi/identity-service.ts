/**
 * CSI Identity: who we are, what we serve, and whether this process is ready (both processes serve it).
 *
 * Probe's `ready` is the CSI spec's readiness: false while the plugin is still initialising but otherwise healthy,
 * true once it has; it never turns false again because Temporal went away later (each call then fails on its
 * own, UNAVAILABLE). The controller is ready when its workflow worker runs. The node agent serves kubelet before it
 * has reached Temporal (agent/node-agent.ts) and is ready once its worker runs and its record was started; until
 * then its Node calls on volumes work and Probe says not ready. Because livenessprobe turns `ready: false` into a
 * restart, the node's liveness is its own /livez, not Probe (deploy/README.md, docs/kubernetes.md).
 */
export interface IdentityOptions {
  driverName: string;
  version: string;
  /** Resolves true once the process has initialised; must not turn false on a later Temporal outage. */
  ready: () => Promise<boolean>;
}

export function createIdentityService(options: IdentityOptions) {
  // CSI: every instance of a plugin reports the same capabilities, whichever services it serves itself.
  // The GroupController is served by every controller, as the Controller is; what it does is in its own capabilities
  // (group snapshots only with --snapshots: csi/group-controller-service.ts).
  const services = ['CONTROLLER_SERVICE', 'VOLUME_ACCESSIBILITY_CONSTRAINTS', 'GROUP_CONTROLLER_SERVICE'];
  return {
    async GetPluginInfo() {
      return { name: options.driverName, vendor_version: options.version, manifest: {} };
    },
    async GetPluginCapabilities() {
      const expansion = [{ volume_expansion: { type: 'ONLINE' } }];
      return { capabilities: [...services.map((type) => ({ service: { type } })), ...expansion] };
    },
    async Probe() {
      return { ready: { value: await options.ready() } };
    },
  };
}
