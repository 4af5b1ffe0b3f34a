// The database a benchmark runs on: a new SQLite file in `dir`, or a new schema in PostgreSQL
// (BENCH_DATABASE_URL, default the local test database), dropped by `drop()`.
import { join } from 'node:path';
import pg from 'pg';

export async function benchDatabase(kind, dir, prefix = 'bench') {
  if (kind !== 'postgres') return { url: `sqlite:${join(dir, 'bench.db')}`, drop: async () => {} };
  const base = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const schema = `${prefix}_${Date.now()}`;
  const admin = async (statement) => {
    const c = new pg.Client({ connectionString: base });
    await c.connect();
    try {
      await c.query(statement);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE SCHEMA ${schema}`);
  return {
    url: `${base}${base.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    drop: () => admin(`DROP SCHEMA ${schema} CASCADE`),
  };
}
