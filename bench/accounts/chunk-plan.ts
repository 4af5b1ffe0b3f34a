// One account's deletion chunks (accountsRepository.deleteChunk) against large tables, on both dialects: the plan of
// every statement a chunk runs, per owned table (EXPLAIN (ANALYZE, BUFFERS) on PostgreSQL, custom and generic plans;
// EXPLAIN QUERY PLAN on SQLite), and the time of each chunk of a whole deletion (accountsService.deleteAccount).
// Usage (after `node scripts/build.mjs`):
//   node --import tsx bench/accounts/chunk-plan.ts [--rows 40000] [--others 40000] [--chunk 2000] [--dialect both|postgres|sqlite]
//     [--no-explain] [--no-delete] [--plans] (print every plan, not only its scans) [--json]
// The account: `rows` rows in each large table (messages, events, workflow runs, idempotency keys, rundown quotes,
// deliveries with one attempt each: test/modules/accounts/fixtures.ts fillEveryTable), and a few in the others; another
// account as many as `others`, so that a table is larger than the account, as in a service with many accounts.
// PostgreSQL at TEST_DATABASE_URL or 127.0.0.1:5432/test (a schema of its own, ANALYZEd as autovacuum would have,
// dropped at the end); SQLite in a temporary file (no ANALYZE: Parley never runs it), deleted at the end. A chunk's time
// is deleteChunk's alone (no BEGIN/COMMIT); the whole deletion's includes SQLite's pause after each chunk.
//
// The statements are taken from deleteChunk itself (a plugin records what it sends, in a transaction rolled back), so
// this file measures whichever statements the checkout's code runs: copied into another checkout, it measures that
// one's (how BENCHMARKS.md compares before and after).
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CompiledQuery, sql, type Kysely, type KyselyPlugin, type Transaction } from 'kysely';
import pg from 'pg';
import type { DialectName } from '../../src/db/database.js';
import type { DB } from '../../src/db/schema.js';
import { systemClock } from '../../src/lib/clock.js';
import { accountsRepository, OWNED_TABLES } from '../../src/modules/accounts/accounts.repository.js';
import { createAccountsService } from '../../src/modules/accounts/accounts.service.js';
import { createTestDatabase } from '../../test/helpers/db.js';
import { fillEveryTable } from '../../test/modules/accounts/fixtures.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '40000' },
    others: { type: 'string', default: '40000' },
    chunk: { type: 'string', default: '2000' },
    dialect: { type: 'string', default: 'both' },
    'no-explain': { type: 'boolean', default: false },
    'no-delete': { type: 'boolean', default: false },
    plans: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});
const ROWS = Number(values.rows);
const OTHERS = Number(values.others);
const CHUNK = Number(values.chunk);
const dialects: DialectName[] = values.dialect === 'both' ? ['postgres', 'sqlite'] : [values.dialect as DialectName];
const A = 'acct_big';
const B = 'acct_other';

const median = (xs: number[]) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

interface Captured { sql: string; parameters: readonly unknown[] }

/** What deleteChunk sends for the first chunk of `table`, in a transaction rolled back. */
async function chunkStatements(db: Kysely<DB>, table: (typeof OWNED_TABLES)[number][1]): Promise<Captured[]> {
  const captured: Captured[] = [];
  class Rollback extends Error {}
  await db
    .transaction()
    .execute(async (trx) => {
      const recorder: KyselyPlugin = {
        transformQuery(args) {
          const q = trx.getExecutor().compileQuery(args.node, args.queryId);
          captured.push({ sql: q.sql, parameters: q.parameters });
          return args.node;
        },
        transformResult: async (args) => args.result,
      };
      await accountsRepository.deleteChunk(trx.withPlugin(recorder) as Transaction<DB>, A, table, CHUNK);
      throw new Rollback();
    })
    .catch((err) => {
      if (!(err instanceof Rollback)) throw err;
    });
  return captured;
}

const literal = (v: unknown): string => {
  if (Array.isArray(v)) return pg.Client.prototype.escapeLiteral(`{${v.map((x) => `"${String(x).replace(/(["\\])/g, '\\$1')}"`).join(',')}}`);
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (v === null) return 'null';
  return pg.Client.prototype.escapeLiteral(String(v));
};

interface PlanNode { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; Plans?: PlanNode[]; 'Actual Total Time'?: number; 'Shared Hit Blocks'?: number; 'Shared Read Blocks'?: number }
/** The scans of a plan, as `Seq Scan on events`, `Index Scan on events (events_pkey)`, `Tid Scan on events`. */
const scans = (p: PlanNode): string[] => [
  ...(/Scan/.test(p['Node Type']) && p['Relation Name'] ? [`${p['Node Type']} on ${p['Relation Name']}${p['Index Name'] ? ` (${p['Index Name']})` : ''}`] : []),
  ...(p.Plans ?? []).flatMap(scans),
];
const joins = (p: PlanNode): string[] => [...(/Join|Nested Loop/.test(p['Node Type']) ? [p['Node Type']] : []), ...(p.Plans ?? []).flatMap(joins)];

/**
 * PostgreSQL: each statement of the chunk, EXPLAIN (ANALYZE, BUFFERS), after the ones before it (a transaction per
 * statement, rolled back). Custom: planned for the values given, as the first five runs of a prepared statement are;
 * generic: planned once for any values (PREPARE under plan_cache_mode force_generic_plan), as later runs may be.
 */
async function explainPostgres(db: Kysely<DB>, statements: Captured[]) {
  const out = [];
  for (let i = 0; i < statements.length; i++) {
    const s = statements[i]!;
    const row: Record<string, unknown> = { statement: s.sql.replace(/\$\d+(, \$\d+)+/, (m) => `$… (${m.split(',').length} values)`) };
    for (const mode of ['custom', 'generic'] as const) {
      await db
        .connection()
        .execute(async (c) => {
          await c.executeQuery(CompiledQuery.raw('begin'));
          try {
            for (const before of statements.slice(0, i)) await c.executeQuery(CompiledQuery.raw(before.sql, [...before.parameters]));
            let plan: { Plan: PlanNode; 'Execution Time': number; 'Planning Time': number };
            if (mode === 'custom') {
              plan = ((await c.executeQuery(CompiledQuery.raw(`explain (analyze, buffers, format json) ${s.sql}`, [...s.parameters]))).rows[0] as Record<string, [typeof plan]>)['QUERY PLAN']![0];
            } else {
              await c.executeQuery(CompiledQuery.raw(`set local plan_cache_mode = force_generic_plan`));
              await c.executeQuery(CompiledQuery.raw(`prepare bench_chunk as ${s.sql}`));
              const args = s.parameters.length ? `(${s.parameters.map(literal).join(', ')})` : '';
              plan = ((await c.executeQuery(CompiledQuery.raw(`explain (analyze, buffers, format json) execute bench_chunk${args}`))).rows[0] as Record<string, [typeof plan]>)['QUERY PLAN']![0];
            }
            row[`${mode} scans`] = scans(plan.Plan).join(', ');
            row[`${mode} joins`] = joins(plan.Plan).join(', ') || '-';
            row[`${mode} ms`] = Number(plan['Execution Time'].toFixed(2));
            row[`${mode} buffers`] = (plan.Plan['Shared Hit Blocks'] ?? 0) + (plan.Plan['Shared Read Blocks'] ?? 0);
            if (values.plans) {
              const text = (await c.executeQuery(CompiledQuery.raw(mode === 'custom' ? `explain (costs off) ${s.sql}` : `explain (costs off) execute bench_chunk${s.parameters.length ? `(${s.parameters.map(literal).join(', ')})` : ''}`, mode === 'custom' ? [...s.parameters] : []))).rows as Array<Record<string, string>>;
              row[`${mode} plan`] = text.map((r) => r['QUERY PLAN']).join('\n');
            }
          } finally {
            await c.executeQuery(CompiledQuery.raw('rollback'));
            // PREPARE outlives the transaction.
            if (mode === 'generic') await c.executeQuery(CompiledQuery.raw('deallocate bench_chunk'));
          }
        });
    }
    out.push(row);
  }
  return out;
}

async function explainSqlite(db: Kysely<DB>, statements: Captured[]) {
  const out = [];
  for (const s of statements) {
    const rows = (await db.executeQuery(CompiledQuery.raw(`explain query plan ${s.sql}`, [...s.parameters]))).rows as Array<{ detail: string }>;
    out.push({ statement: s.sql.replace(/\?(, \?)+/, (m) => `?… (${m.split(',').length} values)`), plan: rows.map((r) => r.detail).join(' | ') });
  }
  return out;
}

const results: Record<string, unknown> = {};
for (const dialect of dialects) {
  const file = join(tmpdir(), `parley-chunk-plan-${process.pid}.db`);
  const d = await createTestDatabase(dialect, dialect === 'sqlite' ? { file } : {});
  try {
    const db = d.db;
    for (const id of [A, B]) {
      await db.insertInto('accounts').values({ id, name: id, plan: 'pro', rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 0, deletion_started_at: null }).execute();
    }
    const t0 = performance.now();
    await fillEveryTable(db, A, ROWS);
    if (OTHERS > 0) await fillEveryTable(db, B, OTHERS);
    if (dialect === 'postgres') await sql`vacuum analyze`.execute(db);
    console.log(`\n${dialect}: account ${ROWS} rows a large table, another account ${OTHERS}; chunks of ${CHUNK} (filled in ${Math.round(performance.now() - t0)} ms)`);
    const report: Record<string, unknown> = {};
    if (!values['no-explain']) {
      const plans: Array<Record<string, unknown>> = [];
      for (const [, table] of OWNED_TABLES) {
        const statements = await chunkStatements(db, table);
        const explained = dialect === 'postgres' ? await explainPostgres(db, statements) : await explainSqlite(db, statements);
        for (const e of explained) plans.push({ table, ...e });
      }
      if (values.plans) for (const p of plans) console.log(p);
      console.table(plans.map(({ 'custom plan': _c, 'generic plan': _g, ...p }) => p));
      report.plans = plans;
    }
    if (!values['no-delete']) {
      // Each chunk's deleteChunk, timed (the bench's own wrapper: the service calls the repository's method by name).
      const chunks: Array<{ table: string; ms: number; rows: number }> = [];
      const original = accountsRepository.deleteChunk;
      accountsRepository.deleteChunk = async (conn, accountId, table, rows) => {
        const began = performance.now();
        const counts = await original.call(accountsRepository, conn, accountId, table, rows);
        chunks.push({ table, ms: performance.now() - began, rows: Object.values(counts).reduce((a, b) => a + (b ?? 0), 0) });
        return counts;
      };
      const service = createAccountsService(db, systemClock, { dialect });
      const began = performance.now();
      try {
        await service.deleteAccount(A, { chunkRows: CHUNK });
      } finally {
        accountsRepository.deleteChunk = original;
      }
      // The whole run: on SQLite it includes the pause after each chunk (MIN_CHUNK_PAUSE_MS).
      const totalMs = performance.now() - began;
      const timed = chunks.filter((c) => c.rows > 0).map((c) => c.ms);
      const byTable = OWNED_TABLES.map(([, table]) => {
        const mine = chunks.filter((c) => c.table === table && c.rows > 0);
        return { table, chunks: mine.length, rows: mine.reduce((a, c) => a + c.rows, 0), medianChunkMs: Number(median(mine.map((c) => c.ms)).toFixed(1)), maxChunkMs: Number(Math.max(0, ...mine.map((c) => c.ms)).toFixed(1)), sumMs: Math.round(mine.reduce((a, c) => a + c.ms, 0)) };
      }).filter((t) => t.chunks > 0);
      console.table(byTable);
      const summary = { totalMs: Math.round(totalMs), chunkMsSum: Math.round(timed.reduce((a, b) => a + b, 0)), chunks: timed.length, medianChunkMs: Number(median(timed).toFixed(1)), longestChunkMs: Number(Math.max(...timed).toFixed(1)) };
      console.log(`${dialect}: whole deletion ${JSON.stringify(summary)}`);
      report.byTable = byTable;
      report.summary = summary;
      // The other account is untouched.
      const left = await db.selectFrom('events').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', B).executeTakeFirstOrThrow();
      if (Number(left.n) !== OTHERS) throw new Error(`the other account's events: ${left.n}, expected ${OTHERS}`);
    }
    results[dialect] = report;
  } finally {
    await d.cleanup();
    if (dialect === 'sqlite') for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  }
}
if (values.json) console.log(JSON.stringify(results));
