/** CSI Identity: who we are, what we serve, and whether we are ready (both processes serve it). */
export interface IdentityOptions {
  driverName: string;
  version: string;
  /** Controller: CONTROLLER_SERVICE and topology; node agent: topology only. */
  controller: boolean;
  /** Resolves true only when the process can do its work (Temporal answers, storage is open). */
  ready: () => Promise<boolean>;
}

export function createIdentityService(options: IdentityOptions) {
  const services = options.controller
    ? ['CONTROLLER_SERVICE', 'VOLUME_ACCESSIBILITY_CONSTRAINTS']
    : ['VOLUME_ACCESSIBILITY_CONSTRAINTS'];
  return {
    async GetPluginInfo() {
      return { name: options.driverName, vendor_version: options.version, manifest: {} };
    },
    async GetPluginCapabilities() {
      const expansion = options.controller ? [{ volume_expansion: { type: 'ONLINE' } }] : [];
      return { capabilities: [...services.map((type) => ({ service: { type } })), ...expansion] };
    },
    async Probe() {
      return { ready: { value: await options.ready() } };
    },
  };
}
