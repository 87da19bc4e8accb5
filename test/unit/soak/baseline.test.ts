import { newestReleaseCommit } from '../../soak/baseline';

/** The soak's default baseline is the newest release's commit, read from its CHANGELOG.md entry. */
describe('newestReleaseCommit', () => {
  const sha = (digit: string) => digit.repeat(40);

  it('reads the commit of the newest entry only', () => {
    const changelog = [
      '# Changelog',
      '',
      '## 0.3.0 (2027-02-01)',
      '',
      `Release commit: \`${sha('b')}\``,
      '',
      '## 0.2.0 (2026-12-05)',
      '',
      `Release commit: \`${sha('a')}\``,
      '',
    ].join('\n');
    expect(newestReleaseCommit(changelog)).toBe(sha('b'));
  });

  it('is undefined while the newest entry names no commit (the release commit itself), not an older one', () => {
    const changelog = [
      '## 0.3.0 (2027-02-01)',
      '',
      'text',
      '',
      '## 0.2.0 (2026-12-05)',
      '',
      `Release commit: \`${sha('a')}\``,
    ].join('\n');
    expect(newestReleaseCommit(changelog)).toBeUndefined();
    expect(newestReleaseCommit('# Changelog\n')).toBeUndefined();
  });

  it('reads the last entry of the file too', () => {
    expect(newestReleaseCommit(`## 0.2.0 (2026-12-05)\n\nRelease commit: \`${sha('c')}\`\n`)).toBe(sha('c'));
  });
});
