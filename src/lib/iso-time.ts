/*
 * Strict ISO 8601 instants for query parameters. Date.parse is too lenient for an API contract: it accepts
 * "January 1", rolls 2026-02-30 over to March 2 and reads a zone-less date-time as server-local time. Here
 * a value is either a calendar date (midnight UTC) or a date-time with optional seconds and fraction; a
 * date-time without a zone designator is UTC, like every timestamp the API answers.
 */
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?([Zz]|([+\- ])(\d{2}):?(\d{2}))?)?$/;

/** Proleptic Gregorian, as ISO 8601 counts (year 0000 is 1 BC, a leap year). Not Date.UTC: it maps years 0..99 onto 1900..1999. */
const isLeapYear = (y: number) => y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const daysInMonth = (y: number, m: number) => (m === 2 && isLeapYear(y) ? 29 : DAYS_IN_MONTH[m - 1]!);

/**
 * Unix milliseconds of the instant, rounded UP to the next whole millisecond when the fraction is finer:
 * stored times are whole milliseconds, so for any stored t, `t >= x` ⇔ `t >= ceil(x)` and `t < x` ⇔
 * `t < ceil(x)`, and both ends of a half-open range stay exact. Null when the text is not such an instant.
 */
export function parseIsoInstant(text: string): number | null {
  const m = ISO.exec(text);
  if (!m) return null;
  const [, ys, mos, ds, hs, mis, ss, frac, zone, sign, ohs, oms] = m;
  const y = Number(ys);
  const mo = Number(mos);
  const d = Number(ds);
  const h = Number(hs ?? 0);
  const mi = Number(mis ?? 0);
  const s = Number(ss ?? 0);
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo) || h > 23 || mi > 59 || s > 59) return null;
  // A zone designator only makes sense after a time; "2026-01-01Z" is not ISO 8601.
  if (zone !== undefined && hs === undefined) return null;
  let offsetMin = 0;
  if (sign !== undefined) {
    const oh = Number(ohs);
    const om = Number(oms);
    if (oh > 23 || om > 59) return null;
    // An unencoded "+" in a query string arrives as a space: "…T10:00:00 02:00" meant "+02:00".
    offsetMin = (sign === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const digits = (frac ?? '').padEnd(9, '0');
  const wholeMs = Number(digits.slice(0, 3));
  const finer = Number(digits.slice(3)) > 0 ? 1 : 0;
  const date = new Date(0);
  // setUTCFullYear, unlike Date.UTC, does not map years 0..99 onto 1900..1999.
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, wholeMs);
  return date.getTime() + finer - offsetMin * 60_000;
}
