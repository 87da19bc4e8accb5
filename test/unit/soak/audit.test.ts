import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { auditPools, snapshotCopyProbe } from '../../soak/audit';
import type { Cluster } from '../../soak/cluster';
import { Model, type OpRecord } from '../../soak/model';

/**
 * The audit's count of snapshots lost and copies leaked when snapshot names are used again (issue 33): each case
 * as the driver answered it before the fix, and as it must answer, over pools written on disk the way the agents
 * lay them out (storage/pool/pool-layout.ts).
 */
const POOL_ID = '202e7ca4-33ca-4e98-9c1f-5b2d7e0a9f11';
const VOLUME = 'v1_node-1_202e7ca433ca4e98_32be900dbc7c4c639840136137e5bb61';
const snapshotId = (key: string) => `s1_node-1_202e7ca433ca4e98_${key}`;
const X = 'aa'.repeat(16);
const Y = 'bb'.repeat(16);

let root: string;
beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'soak-audit-'));
  const pool = path.join(root, 'node-1');
  fs.mkdirSync(path.join(pool, 'snapshots', 'data'), { recursive: true });
  fs.mkdirSync(path.join(pool, 'snapshots', 'records'), { recursive: true });
  fs.writeFileSync(path.join(pool, 'pool.json'), JSON.stringify({ poolId: POOL_ID }));
  // The source volume, known to the model below.
  fs.mkdirSync(path.join(pool, 'volumes', VOLUME.split('_')[3] as string), { recursive: true });
  fs.mkdirSync(path.join(pool, 'records'), { recursive: true });
  fs.writeFileSync(path.join(pool, 'records', `${VOLUME.split('_')[3]}.json`), JSON.stringify({ name: 'soak-u1' }));
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

function copyOnDisk(key: string, name: string, present: boolean): void {
  const pool = path.join(root, 'node-1', 'snapshots');
  if (present) {
    fs.mkdirSync(path.join(pool, 'data', key), { recursive: true });
    fs.writeFileSync(path.join(pool, 'records', `${key}.json`), JSON.stringify({ name }));
  } else {
    fs.rmSync(path.join(pool, 'data', key), { recursive: true, force: true });
    fs.rmSync(path.join(pool, 'records', `${key}.json`), { force: true });
  }
}

const cluster = () =>
  ({
    nodes: [{ name: 'node-1', downThroughout: () => false }],
    pool: (node: string) => path.join(root, node),
    // The work folder, where the audit looks for loop filesystems left frozen: none under this one.
    config: { root },
  }) as unknown as Cluster;

/** A model holding one volume (soak-u1) and one snapshot name of it. */
function setUp() {
  const model = new Model(0);
  model.copyOnDisk = snapshotCopyProbe(cluster());
  const source = model.newUnique(16 * 1024 ** 2);
  model.created(model.newOp('create', source.name, 'test'), VOLUME);
  const snapshot = model.newSnapshot(source);
  const op = (kind: OpRecord['kind'], extra: Partial<OpRecord> = {}) => {
    const record = model.newOp(kind, snapshot.name, 'test', extra);
    record.outcome = 'ok';
    record.endedAt = record.startedAt;
    return record;
  };
  const create = (id: string, extra: Partial<OpRecord> = {}) => {
    const record = op('snapshot', extra);
    record.snapshotId = id;
    model.snapshotCreated(record, id);
  };
  return { model, name: snapshot.name, op, create };
}

describe('the soak audit, snapshot names used again', () => {
  it('re-create after a deletion answered with the deleted ID, then deleted again: one leaked copy, an anomaly', () => {
    const { model, name, op, create } = setUp();
    copyOnDisk(X, name, true);
    create(snapshotId(X));
    copyOnDisk(X, name, false);
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(X) }));
    // The re-create attaches to the first create: the same ID, a new copy under the same key.
    copyOnDisk(X, name, true);
    create(snapshotId(X), { recreate: true });
    // The second deletion attaches to the first one's completed run: OK at once, the copy stays.
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(X) }));
    const audit = auditPools(cluster(), model, []).snapshots;
    expect(audit.leaked.map((copy) => copy.key)).toEqual([X]);
    expect(audit.lost).toEqual([]);
    expect(model.anomalies.map((anomaly) => anomaly.what)).toEqual([
      expect.stringContaining(`answered ${snapshotId(X)}: the snapshot ${snapshotId(X)}, already deleted`),
    ]);
  });

  it('re-create after a deletion answered with a new ID: nothing leaked or lost, with it held or deleted again', () => {
    const { model, name, op, create } = setUp();
    copyOnDisk(X, name, true);
    create(snapshotId(X));
    copyOnDisk(X, name, false);
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(X) }));
    copyOnDisk(Y, name, true);
    create(snapshotId(Y), { recreate: true });
    expect(auditPools(cluster(), model, []).snapshots).toMatchObject({ known: 1, onDisk: 1, leaked: [], lost: [] });
    copyOnDisk(Y, name, false);
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(Y) }));
    expect(auditPools(cluster(), model, []).snapshots).toMatchObject({ known: 0, onDisk: 0, leaked: [], lost: [] });
    expect(model.anomalies).toEqual([]);
  });

  it('re-create while the deletion waits, answered with the doomed ID: one lost snapshot, an anomaly', () => {
    const { model, name, create } = setUp();
    copyOnDisk(X, name, true);
    create(snapshotId(X));
    // The deletion is issued (its node is down: it waits), then the name is asked for again.
    const deletion = model.newOp('snapshot-delete', name, 'test', { snapshotId: snapshotId(X) });
    model.snapshotState(name).supersedes = snapshotId(X);
    create(snapshotId(X), { recreate: true });
    // The node returns: the deletion removes the copy and answers OK.
    copyOnDisk(X, name, false);
    deletion.outcome = 'ok';
    model.snapshotDeleted(deletion);
    const audit = auditPools(cluster(), model, []).snapshots;
    expect(audit.lost).toEqual([{ name, snapshotId: snapshotId(X), reason: expect.stringContaining(`no copy ${X}`) }]);
    expect(audit.leaked).toEqual([]);
    expect(model.anomalies.map((anomaly) => anomaly.what)).toEqual([
      expect.stringContaining(`answered ${snapshotId(X)}, whose deletion was in flight`),
    ]);
  });

  it('re-create while the deletion waits, answered after it ended with a new ID: nothing leaked or lost', () => {
    const { model, name, op, create } = setUp();
    copyOnDisk(X, name, true);
    create(snapshotId(X));
    model.snapshotState(name).supersedes = snapshotId(X);
    copyOnDisk(X, name, false);
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(X) }));
    copyOnDisk(Y, name, true);
    create(snapshotId(Y), { recreate: true });
    expect(auditPools(cluster(), model, []).snapshots).toMatchObject({ known: 1, onDisk: 1, leaked: [], lost: [] });
    expect(model.anomalies).toEqual([]);
  });

  it('counts a snapshot lost to its deletion even when the CO deletes it afterwards (nothing left at the end)', () => {
    const { model, name, op, create } = setUp();
    copyOnDisk(X, name, true);
    create(snapshotId(X));
    const deletion = model.newOp('snapshot-delete', name, 'test', { snapshotId: snapshotId(X) });
    model.snapshotState(name).supersedes = snapshotId(X);
    create(snapshotId(X), { recreate: true });
    copyOnDisk(X, name, false);
    deletion.outcome = 'ok';
    model.snapshotDeleted(deletion);
    // The CO deletes what it holds: OK at once (the copy is long gone), and the end's disk shows nothing amiss.
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(X) }));
    const audit = auditPools(cluster(), model, []).snapshots;
    expect(audit).toMatchObject({ known: 0, onDisk: 0, leaked: [] });
    expect(audit.lost).toEqual([
      { name, snapshotId: snapshotId(X), reason: expect.stringContaining('the copy is gone') },
    ]);
  });

  it('counts a copy leaked by a false OK even when a later answer hands its ID out again (held at the end)', () => {
    const { model, name, op, create } = setUp();
    copyOnDisk(X, name, true);
    create(snapshotId(X));
    copyOnDisk(X, name, false);
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(X) }));
    copyOnDisk(X, name, true);
    create(snapshotId(X), { recreate: true });
    // Answered from the first deletion's run: OK, the new copy stays.
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(X) }));
    // Asked for once more: the same ID again, held, its copy on disk; the end's disk alone shows nothing amiss.
    create(snapshotId(X), { recreate: true });
    const audit = auditPools(cluster(), model, []).snapshots;
    expect(audit).toMatchObject({ known: 1, onDisk: 1, lost: [] });
    expect(audit.leaked).toEqual([
      expect.objectContaining({
        node: 'node-1',
        key: X,
        reason: expect.stringContaining('answered OK with the copy on disk'),
      }),
    ]);
  });

  it('counts a snapshot lost when a re-create answers the deleted ID without a copy, even if deleted afterwards', () => {
    const { model, name, op, create } = setUp();
    copyOnDisk(X, name, true);
    create(snapshotId(X));
    model.snapshotState(name).supersedes = snapshotId(X);
    copyOnDisk(X, name, false);
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(X) }));
    // The re-create waited for the deletion, then attached to the first create: its ID, no copy.
    create(snapshotId(X), { recreate: true });
    model.snapshotDeleted(op('snapshot-delete', { snapshotId: snapshotId(X) }));
    const audit = auditPools(cluster(), model, []).snapshots;
    expect(audit).toMatchObject({ known: 0, onDisk: 0, leaked: [] });
    expect(audit.lost).toEqual([
      { name, snapshotId: snapshotId(X), reason: expect.stringContaining('no copy on disk') },
    ]);
  });
});

describe('the soak audit, group snapshots', () => {
  const GROUP = `g1_node-1_202e7ca433ca4e98_${'cc'.repeat(16)}`;
  const VOLUME_2 = 'v1_node-1_202e7ca433ca4e98_' + 'dd'.repeat(16);

  /** A group of soak-u1 and soak-u2, answered with members X (of soak-u1) and Y (of soak-u2), both on disk. */
  function grouped() {
    const { model } = setUp();
    const second = model.newUnique(16 * 1024 ** 2);
    model.created(model.newOp('create', second.name, 'test'), VOLUME_2);
    const group = model.newGroup('node-1', [model.state('soak-u1'), second]);
    const memberName = (volumeId: string) => `${group.name}/${volumeId.split('_')[3]}`;
    copyOnDisk(X, memberName(VOLUME), true);
    copyOnDisk(Y, memberName(VOLUME_2), true);
    for (const [key, volumeId] of [
      [X, VOLUME],
      [Y, VOLUME_2],
    ] as const) {
      const file = path.join(root, 'node-1', 'snapshots', 'records', `${key}.json`);
      fs.writeFileSync(file, JSON.stringify({ name: memberName(volumeId), groupKey: GROUP.split('_')[3] }));
    }
    const op = (kind: OpRecord['kind'], extra: Partial<OpRecord> = {}) => {
      const record = model.newOp(kind, group.name, 'test', { node: 'node-1', ...extra });
      record.outcome = 'ok';
      record.endedAt = record.startedAt;
      return record;
    };
    const members = [
      { snapshotId: snapshotId(X), sourceVolumeId: VOLUME },
      { snapshotId: snapshotId(Y), sourceVolumeId: VOLUME_2 },
    ];
    // As the workload records an answer: the group's ID and its members on the op, then in the model.
    const memberIds = members.map((m) => m.snapshotId);
    model.groupCreated(op('group', { groupSnapshotId: GROUP, memberIds }), GROUP, members);
    return { model, group, op, memberIds };
  }

  it('holds a group answered with its members on disk: nothing leaked or lost, and a true Get is no anomaly', () => {
    const { model, op, memberIds } = grouped();
    model.groupGot(op('group-get', { groupSnapshotId: GROUP }), memberIds, { members: [...memberIds].reverse() });
    const audit = auditPools(cluster(), model, []).snapshots;
    expect(audit).toMatchObject({ leaked: [], lost: [], groups: { known: 1, members: 2, membersOnDisk: 2 } });
    expect(model.anomalies).toEqual([]);
  });

  it('a deletion answered OK with a member left on disk leaks that member; a Get NOT_FOUND then is false', () => {
    const { model, group, op, memberIds } = grouped();
    copyOnDisk(Y, '', false); // the node deleted one member only
    model.groupDeleted(op('group-delete', { groupSnapshotId: GROUP, memberIds }));
    model.groupGot(op('group-get', { groupSnapshotId: GROUP }), memberIds, 'not-found');
    const audit = auditPools(cluster(), model, []).snapshots;
    expect(audit.lost).toEqual([]);
    expect(audit.leaked).toEqual([
      expect.objectContaining({
        key: X,
        name: `${group.name}/${VOLUME.split('_')[3]}`,
        reason: expect.stringMatching(/^member of group snapshot key c+; op \d+ group ok .* op \d+ group-delete ok/),
      }),
    ]);
    expect(model.anomalies.map((anomaly) => anomaly.what)).toEqual([
      `GetVolumeGroupSnapshot ${GROUP} (${group.name}) answered NOT_FOUND with 1 of 2 member copies on disk: a false "deleted"`,
    ]);
  });

  it('a member of a held group missing from disk is lost; a Get listing another member set is an anomaly', () => {
    const { model, group, op, memberIds } = grouped();
    copyOnDisk(Y, '', false);
    model.groupGot(op('group-get', { groupSnapshotId: GROUP }), memberIds, { members: [snapshotId(X)] });
    const audit = auditPools(cluster(), model, []).snapshots;
    expect(audit.lost).toEqual([
      {
        name: `${group.name}/${VOLUME_2.split('_')[3]}`,
        snapshotId: snapshotId(Y),
        reason: `no copy ${Y} in the pool of node-1`,
      },
    ]);
    expect(model.anomalies).toHaveLength(1);
    expect(model.anomalies[0]?.what).toMatch(/answered s1_\S+, the group's members are /);
  });
});
