const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses "250ms", "30s", "5m", "1.5h", "30d" or a bare number of milliseconds (units case-insensitive).
 * Returns whole milliseconds, or null when malformed. The one duration parser of the code base:
 * config.ts (env) and the webhook retry schedule both use it.
 */
export function parseDuration(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(String(text));
  if (!m) return null;
  const value = Math.round(Number(m[1]) * UNITS[(m[2] ?? 'ms').toLowerCase()]!);
  return Number.isSafeInteger(value) ? value : null;
}

/**
 * Parses a comma-separated list of durations (`"0,5m,30m,2h,24h"`). Throws an Error whose message names
 * `name` and the bad entry (1-based), so a configuration error points at what to fix.
 */
export function parseDurationList(input: string, name: string): number[] {
  const entries = String(input).split(',').map((e) => e.trim());
  if (entries.length === 1 && entries[0] === '') {
    throw new Error(`${name} must list at least one delay (e.g. "0,5m,30m,2h,24h")`);
  }
  return entries.map((entry, i) => {
    if (entry === '') throw new Error(`${name} entry ${i + 1} is empty`);
    const ms = parseDuration(entry);
    if (ms === null) {
      throw new Error(`${name} entry ${i + 1} "${entry}" is not a valid delay: use a number with unit ms, s, m, h or d (e.g. 5m)`);
    }
    return ms;
  });
}
