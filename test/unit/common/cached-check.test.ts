import { cachedCheck } from '../../../common/cached-check';

describe('cachedCheck', () => {
  it('answers from the last check within the TTL and checks again after it', async () => {
    let clock = 0;
    let calls = 0;
    const check = cachedCheck(
      async () => `answer ${++calls}`,
      5000,
      () => clock,
    );
    expect(await check()).toBe('answer 1');
    clock = 4999;
    expect(await check()).toBe('answer 1');
    clock = 5000;
    expect(await check()).toBe('answer 2');
    expect(calls).toBe(2);
  });

  it('shares one running check among concurrent callers', async () => {
    let calls = 0;
    let release: (value: string) => void = () => undefined;
    const check = cachedCheck(() => {
      calls++;
      return new Promise<string>((resolve) => (release = resolve));
    }, 5000);
    const answers = Promise.all([check(), check(), check()]);
    release('ok');
    expect(await answers).toEqual(['ok', 'ok', 'ok']);
    expect(calls).toBe(1);
  });

  it('does not keep a failed check: the next call checks again', async () => {
    let calls = 0;
    const check = cachedCheck(async () => {
      calls++;
      if (calls === 1) throw new Error('Temporal unreachable');
      return 'ok';
    }, 5000);
    await expect(check()).rejects.toThrow('Temporal unreachable');
    expect(await check()).toBe('ok');
  });
});
