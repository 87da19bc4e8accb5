import { FailureType } from '../../../common/failures';
import { parseDuration } from '../../../common/duration';
import { expectDriverError } from '../../support/driver-error';

describe('parseDuration', () => {
  it.each<[string, number]>([
    ['500ms', 500],
    ['0ms', 0],
    ['8s', 8000],
    ['0s', 0],
    ['10m', 600_000],
    ['1h', 3_600_000],
    ['24h', 86_400_000],
    ['1.5s', 1500],
    ['0.5m', 30_000],
    ['1.5ms', 2],
    ['  8s  ', 8000],
  ])('parses %j as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each<string>(['', '8', 's', 'ms', '-1s', '8 s', '1d', '8S', '1H', '8sec', '1h30m', '.5s', '1e3ms', 'PT8S'])(
    'refuses %j as InvalidArgument',
    (text) => {
      expectDriverError(() => parseDuration(text), FailureType.InvalidArgument, /is not a duration/);
    },
  );

  it('names the offending text and the accepted forms in the error', () => {
    const error = expectDriverError(() => parseDuration('1d'), FailureType.InvalidArgument);
    expect(error.message).toContain('"1d"');
    expect(error.message).toContain('500ms, 8s, 10m or 1h');
  });
});
