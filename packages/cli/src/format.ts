/** How the CLI shows things to a person (the JSON answers stay JSON). */

/** An age in words: "12 seconds", "3 minutes", "5 hours", "542 days". */
export function ageInWords(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  if (seconds < 60) return unit(seconds, 'second');
  if (seconds < 3600) return unit(Math.floor(seconds / 60), 'minute');
  if (seconds < 48 * 3600) return unit(Math.floor(seconds / 3600), 'hour');
  return unit(Math.floor(seconds / 86_400), 'day');
}

/** Columns padded to their widest cell, two spaces apart. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  return [header, ...rows].map((cells) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}
