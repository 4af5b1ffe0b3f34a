/** A unique index, as each database names it in the error it raises. */
export interface UniqueIndex {
  name: string;
  table: string;
  columns: readonly string[];
}

/**
 * Whether `err` is the database refusing a write because of `index`: PostgreSQL's unique_violation (23505)
 * naming the index, or SQLite's SQLITE_CONSTRAINT_UNIQUE naming its columns ("UNIQUE constraint failed: t.a, t.b").
 */
export function isUniqueViolation(err: unknown, index: UniqueIndex): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; constraint?: unknown; message?: unknown };
  if (e.code === '23505') return e.constraint === index.name;
  if (e.code === 'SQLITE_CONSTRAINT_UNIQUE' && typeof e.message === 'string') {
    return e.message === `UNIQUE constraint failed: ${index.columns.map((c) => `${index.table}.${c}`).join(', ')}`;
  }
  return false;
}

/**
 * Runs `work`, answering `refusal()` instead of the database error when it breaks `index`. For writes that
 * check a unique value first to name the field in a 400: two requests can both pass the check (PostgreSQL,
 * READ COMMITTED), and the one the index then refuses must get the same answer, not a 500.
 */
export async function refuseUniqueViolation<T>(index: UniqueIndex, work: () => Promise<T>, refusal: () => Promise<Error> | Error): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (isUniqueViolation(err, index)) throw await refusal();
    throw err;
  }
}
