import { FailureType } from '../../../common/failures';
import { formatBytes, parseQuantity } from '../../../common/quantity';
import { expectDriverError } from '../../support/driver-error';

const KI = 1024;
const MI = 1024 ** 2;
const GI = 1024 ** 3;
const TI = 1024 ** 4;

describe('parseQuantity', () => {
  it.each<[string, number]>([
    ['10Gi', 10 * GI],
    ['500M', 500_000_000],
    ['1073741824', GI],
    ['1.5Gi', 1_610_612_736],
    ['0', 0],
    ['1', 1],
    ['1k', 1000],
    ['2Ki', 2 * KI],
    ['3Mi', 3 * MI],
    ['1G', 1_000_000_000],
    ['2T', 2_000_000_000_000],
    ['1Ti', TI],
    ['0.5Ki', 512],
    ['1.0001Ki', 1024],
    ['0.9999Ki', 1023],
    ['1.5', 1],
    ['  10Gi  ', 10 * GI],
    ['10 Gi', 10 * GI],
  ])('parses %j as %d bytes', (text, bytes) => {
    expect(parseQuantity(text)).toBe(bytes);
  });

  it.each<string>([
    '',
    '   ',
    '10GB',
    '-1',
    '-1Gi',
    'Gi',
    '10gi',
    '10K',
    '10m',
    '10Pi',
    '1e9',
    '.5Gi',
    '1.Gi',
    '0x10',
    '10Gi10',
    'ten',
  ])('refuses %j as InvalidArgument', (text) => {
    expectDriverError(() => parseQuantity(text), FailureType.InvalidArgument, /is not a size/);
  });

  it('names the offending text in the error', () => {
    expectDriverError(() => parseQuantity('10GB'), FailureType.InvalidArgument, /"10GB"/);
  });

  it('refuses sizes beyond the safe integer range', () => {
    expectDriverError(() => parseQuantity('9999999Ti'), FailureType.InvalidArgument, /too large/);
  });

  it('accepts the largest safe size in bytes', () => {
    expect(parseQuantity(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
  });
});

describe('formatBytes', () => {
  it.each<[number, string]>([
    [0, '0B'],
    [1, '1B'],
    [1023, '1023B'],
    [KI, '1Ki'],
    [1536, '1.5Ki'],
    [MI, '1Mi'],
    [500_000_000, '476.8Mi'],
    [GI, '1Gi'],
    [10 * GI, '10Gi'],
    [1.5 * GI, '1.5Gi'],
    [TI, '1Ti'],
    [2048 * TI, '2048Ti'],
  ])('formats %d as %s', (bytes, text) => {
    expect(formatBytes(bytes)).toBe(text);
  });

  it('round-trips the whole-unit forms parseQuantity reads', () => {
    for (const text of ['1Ki', '7Mi', '10Gi', '3Ti']) expect(formatBytes(parseQuantity(text))).toBe(text);
  });
});
