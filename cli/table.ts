/** Prints rows as aligned columns for people; scripts should use --output json where offered. */
export function printTable(headers: string[], rows: string[][]): void {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join('  ')
      .trimEnd();
  process.stdout.write([line(headers), ...rows.map(line)].join('\n') + '\n');
}
