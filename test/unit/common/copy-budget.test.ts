import { COPY_TIME_CEILING_MS, DEFAULT_COPY_BUDGET, copyTimeMs } from '../../../common/copy-budget';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

describe('copyTimeMs', () => {
  it('gives a copy the floor plus its size at the rate: 2 minutes plus 20 MiB/s by default', () => {
    expect(copyTimeMs(0)).toBe(DEFAULT_COPY_BUDGET.floorMs);
    expect(copyTimeMs(20 * MiB)).toBe(2 * 60_000 + 1000);
    expect(copyTimeMs(10 * GiB)).toBe(2 * 60_000 + 512_000); // about 10.5 minutes, where cp was killed at 10
    expect(copyTimeMs(64 * MiB, { floorMs: 1000, bytesPerSecond: 1024 ** 4 })).toBe(1000 + 1);
  });

  it('never gives more than the ceiling the copy activities are timed by', () => {
    expect(copyTimeMs(16 * 1024 * GiB)).toBe(COPY_TIME_CEILING_MS);
  });
});
