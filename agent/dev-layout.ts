import path from 'node:path';

/** Where `durable-csi dev` keeps everything, relative to the working directory (DURABLE_CSI_DATA overrides). */
export function devDataDir(): string {
  return path.resolve(process.env.DURABLE_CSI_DATA ?? '.data');
}

export function devLayout(dataDir = devDataDir()) {
  return {
    temporal: path.join(dataDir, 'temporal'),
    logs: path.join(dataDir, 'logs'),
    controllerSocket: path.join(dataDir, 'sockets', 'controller.sock'),
    nodeSocket: (nodeId: string) => path.join(dataDir, 'sockets', `${nodeId}.sock`),
    pool: (nodeId: string) => path.join(dataDir, 'pools', nodeId),
    /** The node agents' --kubelet-dir: a CSI client staging by hand (csc, csi-sanity) uses paths below it. */
    kubelet: path.join(dataDir, 'kubelet'),
  };
}

export function defaultControllerEndpoint(): string {
  return `unix://${devLayout().controllerSocket}`;
}
