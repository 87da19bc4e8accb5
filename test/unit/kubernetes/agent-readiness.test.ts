import type { V1Pod } from '@kubernetes/client-node';
import { agentPodView, notReadyReason, type AgentPodView } from '../../../kubernetes/agent-readiness';

/** An agent Pod as kubelet reports it: Ready or not, its container running, waiting or terminated. */
function pod(options: { uid?: string; ready: boolean; container: 'running' | 'waiting' | 'terminated' }): V1Pod {
  return {
    metadata: { name: 'durable-csi-node-x1', uid: options.uid ?? 'uid-1' },
    spec: { nodeName: 'node-1', containers: [] },
    status: {
      conditions: [{ type: 'Ready', status: options.ready ? 'True' : 'False' }],
      containerStatuses: [
        {
          name: 'durable-csi',
          image: 'x',
          imageID: 'x',
          ready: options.ready,
          restartCount: 0,
          state: { [options.container]: options.container === 'terminated' ? { exitCode: 137 } : {} },
        },
      ],
    },
  };
}

const view = (options: Parameters<typeof pod>[0]): AgentPodView => agentPodView(pod(options));

describe("the agents' Pods: when Kubernetes' word takes a node offline", () => {
  it('reads readiness from the Ready condition, and a stop from any container terminated or waiting', () => {
    expect(view({ ready: true, container: 'running' })).toEqual({
      name: 'durable-csi-node-x1',
      uid: 'uid-1',
      nodeId: 'node-1',
      ready: true,
      running: true,
    });
    expect(view({ ready: false, container: 'terminated' })).toMatchObject({ ready: false, running: false });
    // No container status yet (a Pod just made): nothing reported stopped, so nothing to act on.
    const made = agentPodView({ metadata: { name: 'p', uid: 'u' }, spec: { nodeName: 'n', containers: [] } });
    expect(made).toMatchObject({ ready: false, running: true });
    expect(notReadyReason(undefined, made)).toBeUndefined();
  });

  it('a ready Pod turning not ready, or its container stopping, takes the node offline', () => {
    const ready = view({ ready: true, container: 'running' });
    expect(notReadyReason(ready, view({ ready: false, container: 'running' }))).toBe('the Pod turned not ready');
    expect(notReadyReason(ready, view({ ready: false, container: 'terminated' }))).toBe(
      'a container of the Pod is not running',
    );
    // A container that stopped while the Pod was not ready yet (a crash during start) counts too.
    const starting = view({ ready: false, container: 'running' });
    expect(notReadyReason(starting, view({ ready: false, container: 'waiting' }))).toBe(
      'a container of the Pod is not running',
    );
  });

  it('only changes count: a Pod that stays not ready, or stays ready, is told once at most', () => {
    const down = view({ ready: false, container: 'waiting' });
    expect(notReadyReason(down, view({ ready: false, container: 'waiting' }))).toBeUndefined();
    expect(notReadyReason(down, view({ ready: false, container: 'terminated' }))).toBeUndefined();
    const ready = view({ ready: true, container: 'running' });
    expect(notReadyReason(ready, view({ ready: true, container: 'running' }))).toBeUndefined();
  });

  it('a Pod seen first counts only with a container not running: a starting agent already holds presence', () => {
    expect(notReadyReason(undefined, view({ ready: false, container: 'running' }))).toBeUndefined();
    expect(notReadyReason(undefined, view({ ready: true, container: 'running' }))).toBeUndefined();
    expect(notReadyReason(undefined, view({ ready: false, container: 'waiting' }))).toBe(
      'a container of the Pod is not running',
    );
  });

  it("another Pod of the same name (its UID new) is seen afresh, not as the old one's change", () => {
    const old = view({ uid: 'uid-old', ready: true, container: 'running' });
    expect(notReadyReason(old, view({ uid: 'uid-new', ready: false, container: 'running' }))).toBeUndefined();
  });

  it('a Pod not bound to a node names no record', () => {
    const unbound = { ...view({ ready: false, container: 'terminated' }), nodeId: undefined };
    expect(notReadyReason(undefined, unbound)).toBeUndefined();
  });
});
