import type { NodeListPage } from '../../../activities/node-activities';
import { LIST_START, pastNode } from '../../../common/list-position';
import { PageBuilder, VOLUME_LIST } from '../../../workflows/listing';

const poolId = '01234567-89ab-cdef-0123-456789abcdef';
const key = (index: number) => index.toString(16).padStart(32, '0');
const id = (nodeId: string, index: number) => `v1_${nodeId}_0123456789abcdef_${key(index)}`;

function answer(nodeId: string, count: number, more = false): NodeListPage {
  const volumes = Array.from({ length: count }, (_, index) => ({
    key: key(index),
    name: `pvc-${index}`,
    capacityBytes: 1,
  }));
  return { nodeId, poolId, volumes, more };
}

describe('a page of the volume listing', () => {
  it('ends inside a node that has more, continuing after its last volume listed', () => {
    const builder = new PageBuilder(VOLUME_LIST, 3, LIST_START);
    expect(builder.add('a', answer('a', 1), false)).toBeUndefined();
    expect(builder.after).toBe(pastNode('a'));
    expect(builder.room).toBe(2);
    const page = builder.add('b', answer('b', 5), false)!;
    expect(page.entries.map((volume) => volume.volumeId)).toEqual([id('a', 0), id('b', 0), id('b', 1)]);
    expect(page.nextToken).toBe(id('b', 1));
    expect(page.answeredNodes).toEqual(['a', 'b']);
  });

  it('ends inside a node whose answer was cut by its byte bound, with fewer entries than asked', () => {
    const page = new PageBuilder(VOLUME_LIST, 10, LIST_START).add('a', answer('a', 2, true), false)!;
    expect(page.entries).toHaveLength(2);
    expect(page.nextToken).toBe(id('a', 1));
  });

  it("ends at a node's last volume: past that node, or the end when no node follows", () => {
    const middle = new PageBuilder(VOLUME_LIST, 2, LIST_START).add('a', answer('a', 2), false)!;
    expect(middle.nextToken).toBe(pastNode('a'));
    const last = new PageBuilder(VOLUME_LIST, 2, LIST_START).add('a', answer('a', 2), true)!;
    expect(last.nextToken).toBe('');
  });

  it('moves past a node that did not answer and names it', () => {
    const builder = new PageBuilder(VOLUME_LIST, 5, LIST_START);
    expect(builder.add('a', undefined, false)).toBeUndefined();
    expect(builder.add('b', answer('b', 1), false)).toBeUndefined();
    const page = builder.finish(false);
    expect(page).toMatchObject({ unreachableNodes: ['a'], answeredNodes: ['b'], nextToken: '' });
    expect(page.entries.map((volume) => volume.volumeId)).toEqual([id('b', 0)]);
  });

  it('ends with a token past the last node asked when the node budget is used up and nodes remain', () => {
    const builder = new PageBuilder(VOLUME_LIST, 5, LIST_START);
    builder.add('a', answer('a', 0), false);
    expect(builder.finish(true)).toMatchObject({ entries: [], nextToken: pastNode('a') });
    expect(new PageBuilder(VOLUME_LIST, 5, id('z', 1)).finish(true).nextToken).toBe(id('z', 1));
  });
});
