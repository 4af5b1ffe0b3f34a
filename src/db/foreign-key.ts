/**
 * Whether `err` is the database refusing a write because a row it references is not there: PostgreSQL's
 * foreign_key_violation (23503), SQLite's SQLITE_CONSTRAINT_FOREIGNKEY (foreign keys are on: database.ts).
 */
export function isForeignKeyViolation(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}
