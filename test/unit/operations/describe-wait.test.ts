import type { NodeRecordView } from '../../../node-records/reads';
import { describeWait } from '../../../operations/start-or-attach';
import { formatDuration } from '../../../common/duration';

describe('formatDuration', () => {
  it.each<[number, string]>([
    [0, '0s'],
    [499, '0s'],
    [500, '1s'],
    [1_000, '1s'],
    [59_000, '59s'],
    [59_499, '59s'],
    [59_500, '1m0s'],
    [60_000, '1m0s'],
    [61_000, '1m1s'],
    [3_599_000, '59m59s'],
    [3_600_000, '1h0m'],
    [3_661_000, '1h1m'],
    [86_399_000, '23h59m'],
    [90_061_000, '25h1m'],
  ])('formats %d ms as %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('clamps negative durations (clock skew) to 0s', () => {
    expect(formatDuration(-1)).toBe('0s');
    expect(formatDuration(-3_600_000)).toBe('0s');
  });
});

describe('describeWait', () => {
  const volumeId = 'v1_node-a_0123456789abcdef_0123456789abcdef0123456789abcdef';
  const now = new Date('2025-01-01T12:00:00Z');
  const started = new Date('2025-01-01T10:30:00Z');

  function node(live: boolean, lastHeartbeat: number): NodeRecordView {
    const view = {
      nodeId: 'node-a',
      poolId: 'c0ffee00-0000-4000-8000-000000000000',
      backend: 'dir',
      capacityBytes: 10,
      availableBytes: 5,
      volumeCount: 1,
      agentVersion: '0.1.0',
      firstSeen: 0,
      lastHeartbeat,
      live,
    };
    return { nodeId: 'node-a', node: view, asOf: lastHeartbeat };
  }

  it('describes a wait on a live node', () => {
    const message = describeWait('deletion', volumeId, 'node-a', node(true, now.getTime() - 5_000), started, now);
    expect(message).toBe(
      `deletion of ${volumeId} has waited 1h30m for node node-a (last heartbeat 5s ago); ` +
        'it completes when the node agent runs it',
    );
  });

  it('says when the node is considered offline', () => {
    const message = describeWait(
      'deletion',
      volumeId,
      'node-a',
      node(false, now.getTime() - 2 * 86_400_000),
      started,
      now,
    );
    expect(message).toBe(
      `deletion of ${volumeId} has waited 1h30m for node node-a (last heartbeat 48h0m ago, considered offline); ` +
        'it completes when the node agent runs it',
    );
  });

  it('does not call a live node offline', () => {
    expect(describeWait('deletion', volumeId, 'node-a', node(true, now.getTime()), now, now)).not.toContain('offline');
    expect(describeWait('deletion', volumeId, 'node-a', node(true, now.getTime()), now, now)).toContain(
      'has waited 0s',
    );
  });

  it('measures the wait from start to now, not from the last heartbeat', () => {
    const justStarted = new Date(now.getTime() - 90_000);
    const message = describeWait('deletion', volumeId, 'node-a', node(true, now.getTime() - 12_000), justStarted, now);
    expect(message).toContain('has waited 1m30s');
    expect(message).toContain('last heartbeat 12s ago');
  });

  it('says how to end the wait for a node with no record', () => {
    const message = describeWait('deletion', volumeId, 'node-a', undefined, started, now);
    expect(message).toContain('has waited 1h30m for node node-a, which is unknown to this driver');
    expect(message).toContain('durable-csi nodes forget node-a --reason');
  });
});
