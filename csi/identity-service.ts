/** CSI Identity: who we are, what we serve, and whether we are ready (both processes serve it). */
export interface IdentityOptions {
  driverName: string;
  version: string;
  /** Resolves true only when the process can do its work (Temporal answers, storage is open). */
  ready: () => Promise<boolean>;
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
      return { ready: { value: await options.ready() } };
    },
  };
}
