// The worker's claim on PostgreSQL, its "account not being deleted" test written two ways: as `not exists` (which the
// planner may turn into an anti-join) and as the per-row scalar probe the claim uses (accountNotBeingDeletedPerRow).
// 200,000 finished deliveries and N due, VACUUM ANALYZEd, then EXPLAIN ANALYZE of each form, median of 7 runs.
// Run: npm run build && node bench/webhooks/claim-plan.mjs   (a new schema in the local test database, dropped after)
import { execFileSync } from 'node:child_process';
import pg from 'pg';

const base = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `bench_claim_${Date.now()}`;
const client = new pg.Client({ connectionString: base });
await client.connect();
await client.query(`create schema ${schema}`);
try {
  const url = `${base}${base.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  execFileSync(process.execPath, ['bin/parley.js', 'migrate', '--json'], { env: { ...process.env, DATABASE_URL: url }, stdio: 'ignore' });
  await client.query(`set search_path = ${schema}`);
  await client.query(`insert into accounts (id, name, plan, created_at) values ('acct_a', 'a', 'pro', 0), ('acct_b', 'b', 'pro', 0)`);
  await client.query(`insert into webhooks (id, account_id, url, events, secret, enabled, created_at, updated_at)
    select 'wh_' || g, 'acct_a', 'http://127.0.0.1/x', '["escalation"]', 'secretsecret', 1, 0, 0 from generate_series(1, 20) g`);
  const join = `select d.id from deliveries d inner join webhooks w on w.id = d.webhook_id where d.status = 'pending' and d.lease_owner is null and d.next_attempt_at <= 9999999999 and w.enabled = 1`;
  const alone = `select d.id from deliveries d where d.status = 'pending' and d.lease_owner is null and d.next_attempt_at <= 9999999999 and (select w.enabled from webhooks w where w.id = d.webhook_id) = 1`;
  const forms = {
    'join, no account probe': join,
    'join, not exists': `${join} and not exists (select 1 from accounts deleting where deleting.id = d.account_id and deleting.deletion_started_at is not null)`,
    'join, scalar probe': `${join} and (select deleting.deletion_started_at from accounts deleting where deleting.id = d.account_id) is null`,
    'no join, scalar probes': `${alone} and (select deleting.deletion_started_at from accounts deleting where deleting.id = d.account_id) is null`,
  };
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log('due     form                    median ms  plan');
  for (const due of [1_000, 5_000, 20_000]) {
    await client.query('truncate deliveries');
    await client.query(`insert into deliveries (id, account_id, webhook_id, event_id, event, url, secret, body, status, next_attempt_at, created_at, updated_at)
      select 'dlv_' || lpad(g::text, 8, '0'), 'acct_a', 'wh_' || (1 + g % 20), 'evt_' || g, 'escalation', 'http://127.0.0.1/x', 'secretsecret', '{}',
        case when g <= 200000 then 'succeeded' else 'pending' end, case when g <= 200000 then null else 1000 + g end, g, g
      from generate_series(1, 200000 + ${due}) g`);
    await client.query('vacuum analyze deliveries');
    for (const [name, query] of Object.entries(forms)) {
      const statement = `explain (analyze, format json, buffers) ${query} order by d.next_attempt_at limit 80 for update of d skip locked`;
      const times = [];
      let plan = '';
      for (let i = 0; i < 7; i++) {
        const { rows } = await client.query(statement);
        const out = rows[0]['QUERY PLAN'][0];
        times.push(out['Execution Time']);
        plan = JSON.stringify(out.Plan).match(/"Node Type":"(Sort|Hash Anti Join|Nested Loop Anti Join)"/g)?.map((m) => m.slice(13, -1)).join(', ') || 'index order, no sort';
      }
      console.log(`${String(due).padEnd(7)} ${name.padEnd(23)} ${median(times).toFixed(3).padStart(9)}  ${plan}`);
      if (process.env.SHOW_PLANS) console.log((await client.query(statement.replace('format json, buffers', 'costs off'))).rows.map((r) => r['QUERY PLAN']).join('\n'));
    }
  }
} finally {
  await client.query(`drop schema ${schema} cascade`);
  await client.end();
}
