import { DriverError } from '../../../common/failures';
import { formatNodeDeletedPolicy, parseNodeDeletedPolicy } from '../../../kubernetes/node-deleted-policy';

describe('--node-deleted', () => {
  it('parses wait and forget-after:DURATION', () => {
    expect(parseNodeDeletedPolicy('wait')).toEqual({ kind: 'wait' });
    expect(parseNodeDeletedPolicy('forget-after:30m')).toEqual({ kind: 'forget-after', afterMs: 30 * 60_000 });
    expect(formatNodeDeletedPolicy(parseNodeDeletedPolicy('forget-after:90s'))).toBe('forget-after:90s');
  });

  it.each(['', 'forget', 'forget-after', 'forget-after:', 'forget-after:soon', 'Wait', 'forget-after:10'])(
    'refuses %p with the accepted forms',
    (text) => {
      expect(() => parseNodeDeletedPolicy(text)).toThrow(DriverError);
      expect(() => parseNodeDeletedPolicy(text)).toThrow(/use wait or forget-after:DURATION/);
    },
  );
});
