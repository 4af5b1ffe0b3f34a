import { Type } from 'typebox';
import { parseIsoInstant } from '../lib/iso-time.js';
import { invalidRequest } from './errors.js';

const Instant = (description: string) =>
  Type.String({ maxLength: 64, description: `${description}; ISO 8601 date (2026-01-01, midnight UTC) or date-time (2026-01-01T09:30:00Z)` });

/** `from` (inclusive) and `to` (exclusive) on createdAt, for every time-filtered endpoint (CONTRACT §4). */
export const TimeRangeQuery = {
  from: Type.Optional(Instant('inclusive lower bound on createdAt')),
  to: Type.Optional(Instant('exclusive upper bound on createdAt')),
};

/** Unix ms bounds of a half-open range [from, to); an open side is undefined. */
export interface TimeRange {
  from?: number;
  to?: number;
}

/**
 * An instant of the API (`query.from`, `body.since`…) in Unix ms, or a 400 naming `field` and the forms it takes: the
 * one parser of the time-filtered lists, a rundown's period and a webhook recover's window.
 */
export function instantField(field: string, text: string): number {
  const ms = parseIsoInstant(text);
  if (ms === null) throw invalidRequest(`${field} must be an ISO 8601 date or date-time such as 2026-01-01 or 2026-01-01T09:30:00Z`);
  return ms;
}

/**
 * Parses both bounds, naming the field that is wrong. `from` must be strictly before `to`: an empty or
 * inverted range is far more often a swapped pair or a misunderstanding of "to is exclusive" than a question
 * whose answer is "nothing", so it is refused rather than silently answering zeros.
 */
export function parseTimeRange(q: { from?: string; to?: string }): TimeRange {
  const range: TimeRange = {};
  for (const field of ['from', 'to'] as const) {
    const text = q[field];
    if (text !== undefined) range[field] = instantField(`query.${field}`, text);
  }
  if (range.from !== undefined && range.to !== undefined && range.from >= range.to) {
    // Compared as parsed, in whole milliseconds (parseIsoInstant rounds up): from=…21.2919Z, to=…21.292Z holds no
    // stored time although its texts differ, and is refused with the others, so the message says how they compare.
    throw invalidRequest('query.from must be earlier than query.to, counted in whole milliseconds (from is inclusive, to is exclusive)');
  }
  return range;
}
