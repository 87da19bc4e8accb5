import { Model } from '../../soak/model';

const VOLUME = 'v1_node-1_202e7ca433ca4e98_32be900dbc7c4c639840136137e5bb61';

describe('the soak model', () => {
  afterEach(() => jest.restoreAllMocks());

  it('forgets a volume whose deletion was issued after its create answered, even in the same millisecond', () => {
    jest.spyOn(Date, 'now').mockReturnValue(1_796_353_633_228);
    const model = new Model(0);
    const name = model.newUnique(16 * 1024 ** 2).name;
    model.created(model.newOp('create', name, 'test'), VOLUME);
    model.deleted(model.newOp('delete', name, 'test', { volumeId: VOLUME }));
    expect(model.known()).toEqual(new Map());
  });

  it('keeps a volume whose create answered after its deletion was issued (the CO holds a PV for it)', () => {
    jest.spyOn(Date, 'now').mockReturnValue(1_796_353_633_228);
    const model = new Model(0);
    const name = model.newUnique(16 * 1024 ** 2).name;
    const create = model.newOp('create', name, 'test');
    const deletion = model.newOp('delete', name, 'test', { volumeId: VOLUME });
    model.created(create, VOLUME);
    model.deleted(deletion);
    expect(model.known()).toEqual(new Map([[name, VOLUME]]));
  });
});
