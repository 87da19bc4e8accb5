import fs from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { findProjectRoot } from '../../../common/project-root';
import { parseVolumeId } from '../../../common/names';
import { abandonedMove } from '../../../operations/move-operations';

/**
 * What `volumes move --cancel` of a terminated move reads from its history (operations/move-operations.ts
 * abandonedMove), on real moves' histories (the replay fixtures): a run that switched its claim is never rolled
 * back; one that did not says what its rollback must undo.
 */
const history = (name: string) =>
  temporal.api.history.v1.History.decode(
    fs.readFileSync(path.join(findProjectRoot(), 'test', 'fixtures', 'histories', `${name}.pb`)),
  );

describe('abandonedMove', () => {
  it('says a move that bound its claim to the copy switched, with the switch it made', () => {
    const { input, abandoned, switched } = abandonedMove(history('move-volume-switched'), 'w');
    expect(switched).toBe(true);
    expect(abandoned.switching?.oldVolumeId).toBe(input.volumeId);
    expect(parseVolumeId(abandoned.switching!.newVolumeId)?.nodeId).toBe(input.targetNodeId);
    expect(abandoned.adoptedOn).toMatch(/\S/);
  });

  it('says a move cancelled in its switch did not switch, with the switch to undo and the pool it pulled into', () => {
    const { abandoned, switched } = abandonedMove(history('move-volume-cancelled'), 'w');
    expect(switched).toBe(false);
    expect(abandoned.switching).toBeDefined();
    expect(abandoned.adoptedOn).toMatch(/\S/);
  });

  it('names no switch for a move without Kubernetes, and no pool for one that never pulled', () => {
    const copied = abandonedMove(history('move-volume'), 'w');
    expect(copied.switched).toBe(false);
    expect(copied.abandoned.switching).toBeUndefined();
    expect(copied.abandoned.adoptedOn).toMatch(/\S/);
    const refused = abandonedMove(history('move-volume-rolled-back'), 'w');
    expect(refused.input.moveKey).toMatch(/^[0-9a-f]{32}$/);
    expect(refused.switched).toBe(false);
    expect(refused.abandoned).toEqual({}); // it stopped before its offer: no pull, no switch
  });

  it('refuses a history without its input', () => {
    expect(() => abandonedMove({ events: [] }, 'driver/move/v1_x')).toThrow(
      /the history of driver\/move\/v1_x has no input/,
    );
  });
});
