const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses "250ms", "30s", "5m", "2h" or a bare number of milliseconds. Returns null when malformed. */
export function parseDuration(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m) return null;
  const value = Number(m[1]) * UNITS[m[2] ?? 'ms']!;
  return Number.isFinite(value) ? Math.round(value) : null;
}
