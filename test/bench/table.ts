/** Plain-text tables and number formats for the benchmark report. */
export const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(value < 10 ? 2 : 1) : '-');
export const num = (value: number, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : '-');

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: string[]) => cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join('  ');
  return [line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}
