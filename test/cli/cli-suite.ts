import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { Migrator } from 'kysely';
import { migrationProvider, migrations } from '../../src/db/migrations/index.js';
import { SCOPES } from '../../src/modules/accounts/accounts.schemas.js';
import { migrationState, openDatabase, type DialectName } from '../../src/db/database.js';
import { PG_URL } from '../helpers/db.js';

// The tests run the CLI as a user does, through bin/parley.js and the build: half the start-up time of running
// the sources through tsx, which made these suites the slowest files of the run. npm test builds first.
const ROOT = join(import.meta.dirname, '../..');
export const ENTRY = join(ROOT, 'bin/parley.js');

function newestMtime(dir: string): number {
  return Math.max(
    0,
    ...readdirSync(dir, { withFileTypes: true }).map((e) => (e.isDirectory() ? newestMtime(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs)),
  );
}

/** A build older than the sources would test yesterday's CLI; say so instead. */
export function assertBuildIsFresh() {
  const built = join(ROOT, 'dist/cli/main.js');
  if (!existsSync(built) || statSync(built).mtimeMs < newestMtime(join(ROOT, 'src'))) {
    throw new Error('dist/ is older than src/: run `npm run build` (npm test does it) before the CLI tests');
  }
}

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A real child process, as a user runs it; env is the whole environment of the child (plus PATH). */
export function cli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [ENTRY, ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `--json` promises one JSON object on stdout and nothing else there. */
export function oneJson(r: CliResult): any {
  const lines = r.stdout.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 1, `exactly one line on stdout, got: ${r.stdout}\nstderr: ${r.stderr}`);
  const obj = JSON.parse(lines[0]!);
  assert.equal(typeof obj, 'object');
  assert.ok(obj !== null && !Array.isArray(obj));
  return obj;
}

/** A database URL nobody has migrated yet: a new SQLite file, or a new empty PostgreSQL schema. */
export async function freshDatabase(dialect: string): Promise<{ url: string; cleanup(): Promise<void> }> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'parley-cli-'));
    return { url: `sqlite:${join(dir, 'sub', 'parley.db')}`, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const schema = `cli_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  return {
    url: `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    async cleanup() {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
    },
  };
}

/** Starts `parley serve --json` on a free port and resolves once it printed where it listens. */
/** SIGTERM, and the exit code; 'hung' (and a SIGKILL) if the process did not exit within 15 s. */
export async function stopChild(child: ChildProcess): Promise<number | null | 'hung'> {
  if (child.exitCode !== null) return child.exitCode;
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((r) => (timer = setTimeout(() => r('hung'), 15_000)));
  const result = await Promise.race([exited, hung]);
  clearTimeout(timer);
  if (result === 'hung') child.kill('SIGKILL');
  return result;
}

export async function startServe(env: Record<string, string>) {
  const child = spawn(process.execPath, [ENTRY, 'serve', '--json', '--no-worker'], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const listening = await new Promise<string>((resolve, reject) => {
    // On failure the child is killed: left running, its pipes would keep this test file alive forever.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve did not start: ${stderr}`));
    }, 60_000);
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      const line = stdout.split('\n').find((l) => l.includes('listening'));
      if (line) {
        clearTimeout(timer);
        const said = JSON.parse(line) as { listening: string; api: string };
        // The API's base URL beside the bare address: what a client is configured with.
        if (said.api !== `${said.listening}/v1`) reject(new Error(`serve --json said ${line}`));
        resolve(said.listening);
      }
    });
    child.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
  });
  return {
    url: listening,
    stderr: () => stderr,
    /** SIGTERM; the exit code, or 'hung' (and a SIGKILL) if it did not exit within 15 s. */
    stop: () => stopChild(child),
  };
}

/**
 * A new database for a describe block's CLI runs (the build checked first): `env` is the environment that points
 * the CLI at it, set before the first test; the database is dropped after the last.
 */
export function useCliDatabase(dialect: DialectName) {
  const state = { env: {} as Record<string, string> };
  let db: { url: string; cleanup(): Promise<void> } | undefined;
  before(async () => {
    assertBuildIsFresh();
    db = await freshDatabase(dialect);
    state.env = { DATABASE_URL: db.url };
  });
  after(() => db?.cleanup());
  return state;
}

/** The CLI suite for one dialect; one test file per dialect so the runner can run them in parallel processes. */
export function cliSuite(dialect: DialectName) {
  describe(`parley CLI (${dialect})`, () => {
    const c = useCliDatabase(dialect);

    test('migrate applies the migrations on a new database, then has nothing to do', async () => {
      const first = await cli(['migrate', '--json'], c.env);
      assert.equal(first.code, 0, first.stderr);
      assert.deepEqual(oneJson(first), { applied: Object.keys(migrations) });
      const second = await cli(['migrate'], c.env);
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stdout, /up to date/);
    });

    test('parley serve on an empty database prints how to create an account, and serves', async () => {
      const s = await startServe({ ...c.env, LOG_LEVEL: 'warn' });
      try {
        assert.match(s.stderr(), /no account yet/);
        // Several API nodes on one PostgreSQL without Redis each count rate limits alone: the operator is told.
        if (dialect === 'postgres') assert.match(s.stderr(), /REDIS_URL is not set: rate limits are counted per API node/);
        else assert.doesNotMatch(s.stderr(), /REDIS_URL/);
        assert.match(s.stderr(), /parley init/);
        assert.match(s.stderr(), /parley accounts create --name .* --plan pro/);
        assert.match(s.stderr(), /parley keys create --account/);
        const health = await fetch(`${s.url}/v1/health`);
        assert.equal(health.status, 200);
        const r = await fetch(`${s.url}/v1/documents`);
        assert.equal(r.status, 401);
      } finally {
        assert.equal(await s.stop(), 0, 'SIGTERM shuts down cleanly');
      }
    });

    test('accounts create --json prints exactly one JSON object', async () => {
      const r = await cli(['accounts', 'create', '--name', 'Acme', '--plan', 'pro', '--json'], c.env);
      assert.equal(r.code, 0, r.stderr);
      const acct = oneJson(r);
      assert.match(acct.id, /^acct_[0-9a-z]{26}$/);
      assert.equal(acct.name, 'Acme');
      assert.equal(acct.plan, 'pro');
      assert.equal(new Date(acct.createdAt).toISOString(), acct.createdAt);
      const text = await cli(['accounts', 'create', '--name', 'Beta', '--plan', 'business'], c.env);
      assert.equal(text.code, 0);
      assert.match(text.stdout, /^Created account acct_\w+ \(Beta, plan business\)\.\n$/);
      const list = oneJson(await cli(['accounts', 'list', '--json'], c.env));
      assert.ok(list.accounts.some((a: any) => a.id === acct.id));
    });

    // Validation is the same code whatever the database; PostgreSQL runs the storage-touching tests only.
    test('enterprise requires both limits; other plans refuse them; bad values are refused', { skip: dialect !== 'sqlite' && 'covered on sqlite' }, async () => {
      const ok = await cli(['accounts', 'create', '--name', 'Big', '--plan', 'enterprise', '--rate-limit-minute', '5000', '--rate-limit-day', '900000', '--json'], c.env);
      assert.equal(ok.code, 0, ok.stderr);
      const acct = oneJson(ok);
      assert.equal(acct.plan, 'enterprise');
      assert.equal(acct.rateLimitMinute, 5000);
      assert.equal(acct.rateLimitDay, 900000);
      // Listed as created: with its own limits (they were left out of the list).
      const listed = oneJson(await cli(['accounts', 'list', '--json'], c.env)).accounts.find((a: any) => a.id === acct.id);
      assert.deepEqual(listed, acct);
      const cases = [
        [['--plan', 'enterprise'], /--rate-limit-minute is required for the enterprise plan/],
        [['--plan', 'enterprise', '--rate-limit-minute', '10'], /--rate-limit-day is required/],
        [['--plan', 'enterprise', '--rate-limit-minute', '0', '--rate-limit-day', '10'], /--rate-limit-minute must be a positive integer/],
        [['--plan', 'enterprise', '--rate-limit-minute', '1.5', '--rate-limit-day', '10'], /--rate-limit-minute must be a positive integer/],
        [['--plan', 'pro', '--rate-limit-minute', '10', '--rate-limit-day', '10'], /only accepted for the enterprise plan/],
        [['--plan', 'free', '--rate-limit-day', '10'], /only accepted for the enterprise plan/],
        [['--plan', 'gold'], /--plan must be one of free, pro, business, enterprise/],
      ] as const;
      // Child processes start slowly (module loading), so independent ones run side by side.
      const results = await Promise.all(cases.map(([args]) => cli(['accounts', 'create', '--name', 'X', ...args], c.env)));
      results.forEach((r, i) => {
        const [args, re] = cases[i]!;
        assert.notEqual(r.code, 0, args.join(' '));
        assert.match(r.stderr, re);
        assert.equal(r.stdout, '', 'nothing on stdout without --json');
      });
      const j = await cli(['accounts', 'create', '--name', 'X', '--plan', 'enterprise', '--json'], c.env);
      assert.notEqual(j.code, 0);
      assert.match(oneJson(j).error, /--rate-limit-minute is required/);
      const noName = await cli(['accounts', 'create', '--plan', 'pro'], c.env);
      assert.notEqual(noName.code, 0);
      assert.match(noName.stderr, /--name is required/);
    });

    // Both dialects: PostgreSQL keeps the limits in 32-bit integer columns and answered a larger one with "unexpected
    // error: value … is out of range for type integer" (exit 1), where SQLite took it.
    test('enterprise limits up to 2147483647 are taken; a larger one is refused as bad usage, on either database', async () => {
      const ok = await cli(['accounts', 'create', '--name', 'Max', '--plan', 'enterprise', '--rate-limit-minute', '2147483647', '--rate-limit-day', '2147483647', '--json'], c.env);
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal(oneJson(ok).rateLimitDay, 2147483647);
      const [minute, day] = await Promise.all([
        cli(['accounts', 'create', '--name', 'TooBig', '--plan', 'enterprise', '--rate-limit-minute', '2147483648', '--rate-limit-day', '10', '--json'], c.env),
        cli(['accounts', 'create', '--name', 'TooBig', '--plan', 'enterprise', '--rate-limit-minute', '10', '--rate-limit-day', '3000000000', '--json'], c.env),
      ]);
      assert.equal(minute.code, 2, minute.stdout);
      assert.match(oneJson(minute).error, /^--rate-limit-minute must be at most 2147483647$/);
      assert.equal(day.code, 2, day.stdout);
      assert.match(oneJson(day).error, /^--rate-limit-day must be at most 2147483647$/);
      assert.ok(!oneJson(await cli(['accounts', 'list', '--json'], c.env)).accounts.some((a: any) => a.name === 'TooBig'), 'nothing created');
    });

    test('keys: server by default with every scope; public has chat; free refuses server keys clearly; list shows no secret; revoke → 401 over HTTP', async () => {
      const acct = oneJson(await cli(['accounts', 'create', '--name', 'Keys Co', '--plan', 'pro', '--json'], c.env));
      const server = oneJson(await cli(['keys', 'create', '--account', acct.id, '--json'], c.env));
      assert.match(server.id, /^key_/);
      assert.match(server.key, /^sk_[\w-]{20,}$/);
      assert.equal(server.type, 'server');
      assert.deepEqual(server.scopes, [...SCOPES]);

      const [pubR, scopedR, badScope, badType, noAccount, freeR] = await Promise.all([
        cli(['keys', 'create', '--account', acct.id, '--type', 'public', '--json'], c.env),
        cli(['keys', 'create', '--account', acct.id, '--scopes', 'faqs:read, documents:read', '--json'], c.env),
        cli(['keys', 'create', '--account', acct.id, '--scopes', 'admin'], c.env),
        cli(['keys', 'create', '--account', acct.id, '--type', 'root'], c.env),
        cli(['keys', 'create', '--account', 'acct_nope'], c.env),
        cli(['accounts', 'create', '--name', 'Free Co', '--plan', 'free', '--json'], c.env),
      ]);
      const pub = oneJson(pubR);
      assert.match(pub.key, /^pk_/);
      assert.deepEqual(pub.scopes, ['chat']);
      const scoped = oneJson(scopedR);
      assert.deepEqual(scoped.scopes, ['faqs:read', 'documents:read']);
      assert.notEqual(badScope.code, 0);
      assert.match(badScope.stderr, /unknown scope\(s\) admin/);
      assert.notEqual(badType.code, 0);
      assert.match(badType.stderr, /--type must be server or public/);
      assert.notEqual(noAccount.code, 0);
      assert.match(noAccount.stderr, /account acct_nope not found/);

      const free = oneJson(freeR);
      const [refused, freePublic] = await Promise.all([
        cli(['keys', 'create', '--account', free.id], c.env),
        cli(['keys', 'create', '--account', free.id, '--type', 'public', '--json'], c.env),
      ]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /server keys need the Pro plan or above/);
      assert.equal(freePublic.code, 0, freePublic.stderr);

      const list = oneJson(await cli(['keys', 'list', '--account', acct.id, '--json'], c.env));
      assert.equal(list.keys.length, 3);
      assert.deepEqual(list.keys.map((k: any) => k.id).sort(), [server.id, pub.id, scoped.id].sort());
      for (const k of list.keys) {
        assert.equal(k.revokedAt, null);
        assert.ok(!('key' in k) && !('hash' in k), 'no secret in listings');
        assert.ok(!JSON.stringify(k).includes(server.key) && !JSON.stringify(k).includes(pub.key));
      }

      // A verified key is remembered for AUTH_CACHE_TTL (1 s by default, documented), so a revoke from another
      // process takes up to that long to reach a running server; the cache is off here to test the revoke itself.
      const s = await startServe({ ...c.env, AUTH_CACHE_TTL: '0' });
      try {
        const before = await fetch(`${s.url}/v1/documents`, { headers: { authorization: `Bearer ${server.key}` } });
        assert.equal(before.status, 200);
        const revoked = await cli(['keys', 'revoke', server.id, '--json'], c.env);
        assert.equal(revoked.code, 0, revoked.stderr);
        const r = oneJson(revoked);
        assert.equal(r.id, server.id);
        assert.equal(r.revoked, true);
        const afterRevoke = await fetch(`${s.url}/v1/documents`, { headers: { authorization: `Bearer ${server.key}` } });
        assert.equal(afterRevoke.status, 401);
        assert.equal(((await afterRevoke.json()) as any).error.code, 'UNAUTHORIZED');
        // the account's other keys still work
        const other = await fetch(`${s.url}/v1/faqs`, { headers: { authorization: `Bearer ${scoped.key}` } });
        assert.equal(other.status, 200);
      } finally {
        await s.stop();
      }
      const again = oneJson(await cli(['keys', 'list', '--account', acct.id, '--json'], c.env));
      assert.ok(again.keys.find((k: any) => k.id === server.id).revokedAt);
      const unknown = await cli(['keys', 'revoke', 'key_nope'], c.env);
      assert.notEqual(unknown.code, 0);
      assert.match(unknown.stderr, /key key_nope not found/);
    });

    test('init creates an account and a server key, printed once, that works over HTTP; again it refuses unless --force', async () => {
      // Its own empty database: the suite's has accounts by now, and init behaves differently on an empty one.
      const own = await freshDatabase(dialect);
      const e = { DATABASE_URL: own.url };
      try {
        const r = await cli(['init', '--name', 'Init Co', '--json'], e);
        assert.equal(r.code, 0, r.stderr);
        const out = oneJson(r);
        assert.equal(out.account.name, 'Init Co');
        assert.equal(out.account.plan, 'pro');
        assert.match(out.key.key, /^sk_/);
        // Run again: refused, nothing created, and told what to use instead.
        const again = await cli(['init', '--json'], e);
        assert.equal(again.code, 2, again.stderr);
        assert.match(oneJson(again).error, new RegExp(`already has an account \\(${out.account.id}, Init Co\\); nothing was created.*--force`));
        assert.equal(oneJson(await cli(['accounts', 'list', '--json'], e)).accounts.length, 1);
        const text = await cli(['init', '--force'], e);
        assert.equal(text.code, 0, text.stderr);
        assert.match(text.stdout, /shown once/);
        assert.match(text.stdout, /curl -H "Authorization: Bearer sk_/);
        const s = await startServe(e);
        try {
          assert.doesNotMatch(s.stderr(), /no account yet/, 'no hint once accounts exist');
          const res = await fetch(`${s.url}/v1/faqs`, { headers: { authorization: `Bearer ${out.key.key}` } });
          assert.equal(res.status, 200);
        } finally {
          await s.stop();
        }
      } finally {
        await own.cleanup();
      }
    });

    test('SIGTERM with a request stuck in flight still ends the process, after the 10 s deadline', { skip: dialect !== 'sqlite' && 'covered on sqlite' }, async () => {
      const out = oneJson(await cli(['init', '--force', '--json'], c.env));
      // A receiver that never answers, and a test send (which waits for its delivery) stuck on it.
      const sockets: import('node:net').Socket[] = [];
      const silent = createServer((socket) => void sockets.push(socket));
      await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
      const s = await startServe({ ...c.env, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_TIMEOUT: '5m' });
      try {
        const auth = { authorization: `Bearer ${out.key.key}`, 'content-type': 'application/json' };
        const hook = await fetch(`${s.url}/v1/webhooks`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/hook`, events: ['escalation'], secret: 'whsec_stuck_1' }),
        });
        const id = ((await hook.json()) as any).data.id;
        void fetch(`${s.url}/v1/webhooks/${id}/test`, { method: 'POST', headers: { authorization: auth.authorization } }).catch(() => undefined);
        const deadline = Date.now() + 5_000;
        while (sockets.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        assert.equal(sockets.length, 1, 'the test send reached the silent receiver');
        const started = Date.now();
        const code = await s.stop();
        assert.equal(code, 1, s.stderr());
        assert.ok(Date.now() - started < 14_000, `stopped after ${Date.now() - started} ms`);
        assert.match(s.stderr(), /shutdown did not finish within 10 s; exiting/);
      } finally {
        for (const socket of sockets) socket.destroy();
        silent.close();
      }
    });

    test('demo loads a sample knowledge base; run again it skips what the account has', { skip: dialect !== 'sqlite' && 'covered on sqlite' }, async () => {
      const out = oneJson(await cli(['init', '--force', '--json'], c.env));
      const r = await cli(['demo', '--account', out.account.id, '--json'], c.env);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(oneJson(r), { accountId: out.account.id, documents: 5, faqs: 6, skipped: { documents: 0, faqs: 0 } });
      const again = await cli(['demo', '--account', out.account.id], c.env);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stdout, /^Loaded 0 documents and 0 FAQs into acct_\w+\.\nSkipped 5 documents and 6 FAQs the account already has/);
      const missing = await cli(['demo', '--account', 'acct_nope', '--json'], c.env);
      assert.equal(missing.code, 2, missing.stderr);
      assert.deepEqual(oneJson(missing), { error: 'account acct_nope not found' });
    });

    test('init refuses the free plan before creating anything', { skip: dialect !== 'sqlite' && 'covered on sqlite' }, async () => {
      const before = oneJson(await cli(['accounts', 'list', '--json'], c.env));
      const r = await cli(['init', '--plan', 'free', '--json'], c.env);
      assert.equal(r.code, 2, r.stderr);
      assert.match(oneJson(r).error, /needs the pro plan/);
      assert.deepEqual(oneJson(await cli(['accounts', 'list', '--json'], c.env)), before, 'no orphan account');
    });

    test('upgrading: an older version\'s database is migrated by migrate/serve/worker only, which say so; a newer one is refused by name', async () => {
      const older = await freshDatabase(dialect);
      const names = Object.keys(migrations);
      const applied = async () => {
        const database = openDatabase(older.url);
        try {
          return (await migrationState(database.db, database.schema)).applied;
        } finally {
          await database.close();
        }
      };
      try {
        // The database as an older version left it: the first five migrations.
        const database = openDatabase(older.url);
        const migrator = new Migrator({ db: database.db, provider: migrationProvider, ...(database.schema ? { migrationTableSchema: database.schema } : {}) });
        assert.equal((await migrator.migrateTo('0005_rundowns')).error, undefined);
        await database.close();
        const env = { DATABASE_URL: older.url };
        // Commands that read or add rows leave it alone (older nodes may still be running on it) and say what to do.
        for (const args of [['accounts', 'list', '--json'], ['keys', 'list', '--account', 'acct_x', '--json'], ['init', '--json']]) {
          const r = await cli(args, env);
          assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
          assert.match(oneJson(r).error, /an older version of Parley set up this database and it needs this version's migrations \(0006_knowledge_versions, .*\); stop the nodes still running the older version, back it up, then run `parley migrate`/);
        }
        assert.deepEqual(await applied(), names.slice(0, 5), 'nothing was migrated');
        // serve migrates it, and says which migrations it applied.
        const s = await startServe({ ...env, LOG_LEVEL: 'warn' });
        assert.equal(await s.stop(), 0, s.stderr());
        assert.match(s.stderr(), new RegExp(`applied database migrations ${names.slice(5).join(', ')}`));
        assert.deepEqual(await applied(), names);
        assert.equal((await cli(['accounts', 'list', '--json'], env)).code, 0);
        // A database a newer version migrated: refused by name, not as "corrupted".
        const newer = openDatabase(older.url);
        await newer.db.insertInto('kysely_migration' as never).values({ name: '9999_from_the_future', timestamp: new Date().toISOString() } as never).execute();
        await newer.close();
        for (const args of [['migrate', '--json'], ['accounts', 'list', '--json']]) {
          const r = await cli(args, env);
          assert.equal(r.code, 1, r.stderr);
          assert.match(oneJson(r).error, /a newer version of Parley migrated this database \(its migration 9999_from_the_future is unknown to this version\); run that version, or restore the backup taken before the upgrade/);
        }
      } finally {
        await older.cleanup();
      }
    });
  });
}

export function cliConfigSuite() {
  describe('parley CLI: usage and configuration errors', () => {
    const env = { DATABASE_URL: 'sqlite::memory:' };

    test('a bad environment variable exits non-zero naming the variable', async () => {
      const cases = [
        ['PORT', 'abc', /PORT="abc": must be an integer/],
        ['PORT', '0x10B', /PORT="0x10B": must be an integer/],
        ['PORT', '1e3', /PORT="1e3": must be an integer/],
        ['PORT', ' 4302', /PORT=" 4302": must be an integer/],
        ['DATABASE_URL', 'sqlite:', /DATABASE_URL="sqlite:": names no file/],
        ['LLM_BASE_URL', 'notaurl', /LLM_BASE_URL="notaurl": must be an http/],
        ['DATABASE_URL', 'mysql://x', /DATABASE_URL="mysql:\/\/x": must start with sqlite: or postgres:\/\//],
        ['REDIS_URL', 'http://x', /REDIS_URL/],
        ['WEBHOOK_TIMEOUT', 'soon', /WEBHOOK_TIMEOUT/],
        ['WEBHOOK_RETRY_DELAYS', '0,5x', /WEBHOOK_RETRY_DELAYS entry 2 "5x"/],
        ['WEBHOOK_ALLOW_PRIVATE_URLS', 'maybe', /WEBHOOK_ALLOW_PRIVATE_URLS/],
        ['LOG_LEVEL', 'loud', /LOG_LEVEL/],
        ['WORKER_POLL_INTERVAL', '0', /WORKER_POLL_INTERVAL="0": must be a positive duration/],
        // Past Node's timer limit a timeout fires at once and a poll interval spins.
        ['WEBHOOK_TIMEOUT', '600h', /WEBHOOK_TIMEOUT="600h": must be at most 500h/],
        ['WORKER_POLL_INTERVAL', '600h', /WORKER_POLL_INTERVAL="600h": must be at most 500h/],
        ['HOST', 'bad host', /HOST="bad host": must be an IP address or a host name/],
        ['SQLITE_SYNCHRONOUS', 'off', /SQLITE_SYNCHRONOUS="off": must be full or normal/],
        // Checked without LLM_BASE_URL too: the typo shows now, not the day the endpoint is switched on.
        ['LLM_TIMEOUT', 'abc', /LLM_TIMEOUT="abc": must be a positive duration/],
        ['AUTH_CACHE_TTL', 'x', /AUTH_CACHE_TTL="x": must be a duration \(0 turns it off\)/],
        ['WEBHOOK_MAX_PER_ACCOUNT', '0', /WEBHOOK_MAX_PER_ACCOUNT="0": must be an integer from 1 to 1000/],
        ['RUNDOWN_BACKFILL', '1001', /RUNDOWN_BACKFILL="1001": must be an integer from 0 to 1000/],
        // A fraction would be read as half a percent by some and half by others: a percentage only.
        ['PUBLIC_KEY_RATE_SHARE', '0.5', /PUBLIC_KEY_RATE_SHARE="0.5": must be a percentage from 1 to 100, such as 50%/],
        ['PUBLIC_KEY_RATE_SHARE', '0%', /PUBLIC_KEY_RATE_SHARE="0%": must be a percentage/],
        ['PUBLIC_KEY_RATE_SHARE', '101', /PUBLIC_KEY_RATE_SHARE="101": must be a percentage/],
        ['REDIS_KEY_PREFIX', 'my app', /REDIS_KEY_PREFIX="my app": must be 1 to 100 printable ASCII characters without spaces/],
      ] as const;
      const results = await Promise.all(cases.map(([name, value]) => cli(['accounts', 'list'], { ...env, [name]: value })));
      results.forEach((r, i) => {
        const [name, , re] = cases[i]!;
        assert.notEqual(r.code, 0, name);
        assert.match(r.stderr, re);
        assert.equal(r.stdout, '');
      });
      const j = await cli(['migrate', '--json'], { ...env, PORT: 'abc' });
      assert.notEqual(j.code, 0);
      assert.match(oneJson(j).error, /PORT="abc"/);
      const both = await cli(['migrate'], { ...env, PORT: '-1', CONVERSATION_IDLE_TIMEOUT: '0' });
      assert.match(both.stderr, /PORT/);
      assert.match(both.stderr, /CONVERSATION_IDLE_TIMEOUT/, 'every bad variable named at once');
    });

    test('demo without --account (CONTRACT §1 `parley demo`) loads into the only account; with none or several it says what to do', async () => {
      const db = await freshDatabase('sqlite');
      try {
        const denv = { DATABASE_URL: db.url };
        const none = await cli(['demo', '--json'], denv);
        assert.equal(none.code, 2, none.stderr);
        assert.match(oneJson(none).error, /no account yet.*parley init/);
        const first = oneJson(await cli(['init', '--json'], denv));
        const r = await cli(['demo', '--json'], denv);
        assert.equal(r.code, 0, r.stderr);
        assert.deepEqual(oneJson(r), { accountId: first.account.id, documents: 5, faqs: 6, skipped: { documents: 0, faqs: 0 } });
        const second = oneJson(await cli(['accounts', 'create', '--name', 'B', '--plan', 'pro', '--json'], denv));
        const several = await cli(['demo'], denv);
        assert.equal(several.code, 2, several.stderr);
        assert.match(several.stderr, /--account is required: this database has 2 accounts/);
        assert.ok(several.stderr.includes(first.account.id) && several.stderr.includes(second.id), several.stderr);
      } finally {
        await db.cleanup();
      }
    });

    test('a URL with a password is never echoed with it', async () => {
      const [db, redis] = await Promise.all([
        cli(['migrate'], { DATABASE_URL: 'mysql://app:Sup3rSecret@db/prod' }),
        cli(['migrate'], { ...env, REDIS_URL: 'http://:R3disPw@cache:6379' }),
      ]);
      assert.match(db.stderr, /DATABASE_URL="mysql:\/\/app:\*\*\*@db\/prod"/);
      assert.match(redis.stderr, /REDIS_URL="http:\/\/:\*\*\*@cache:6379"/);
      assert.doesNotMatch(db.stderr + redis.stderr, /Sup3rSecret|R3disPw/);
    });

    test('processes started together on a new SQLite file migrate it once; inits started together make one account', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'parley-cli-'));
      try {
        // Kysely takes no migration lock on SQLite: each process ran the migrations and all but one failed with
        // "table ... already exists" (about one run in two with four processes).
        for (let round = 0; round < 3; round++) {
          const url = `sqlite:${join(dir, `migrate-${round}.db`)}`;
          const runs = await Promise.all([1, 2, 3, 4].map(() => cli(['migrate', '--json'], { DATABASE_URL: url })));
          for (const r of runs) assert.equal(r.code, 0, r.stderr);
          const applied = runs.map((r) => oneJson(r).applied.length as number).sort((a, b) => b - a);
          assert.ok(applied[0]! > 0 && applied.slice(1).every((n) => n === 0), `applied: ${applied.join(', ')}`);
        }
        const url = `sqlite:${join(dir, 'init.db')}`;
        const inits = await Promise.all([1, 2, 3, 4].map((i) => cli(['init', '--name', `Co ${i}`, '--json'], { DATABASE_URL: url })));
        assert.deepEqual(inits.map((r) => r.code).sort(), [0, 2, 2, 2], inits.map((r) => r.stderr).join('\n'));
        const listed = oneJson(await cli(['accounts', 'list', '--json'], { DATABASE_URL: url }));
        assert.equal(listed.accounts.length, 1);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    test('a database that cannot be opened is named, without its password, with the reason, and the command exits', async () => {
      const refused = createServer(() => undefined);
      await new Promise<void>((r) => refused.listen(0, '127.0.0.1', r));
      const port = (refused.address() as AddressInfo).port;
      await new Promise<void>((r) => refused.close(() => r())); // a port nothing listens on
      const dir = mkdtempSync(join(tmpdir(), 'parley-cli-'));
      const notADirectory = join(dir, 'a-file');
      writeFileSync(notADirectory, '');
      // A file whose tables clash with the first migration (not Parley's, or damaged by hand).
      const clash = join(dir, 'clash.db');
      const other = new SQLite(clash);
      other.exec('create table accounts (x integer)');
      other.close();
      const [serve, migrate, file, migration, proc] = await Promise.all([
        cli(['serve'], { DATABASE_URL: `postgres://app:Sup3rSecret@127.0.0.1:${port}/test`, PORT: '0', LOG_LEVEL: 'silent' }),
        cli(['migrate'], { DATABASE_URL: `${PG_URL.replace(/\/[^/?]*(\?.*)?$/, '')}/no_such_database_here` }),
        cli(['accounts', 'list', '--json'], { DATABASE_URL: `sqlite:${notADirectory}/sub/parley.db` }),
        cli(['migrate'], { DATABASE_URL: `sqlite:${clash}` }),
        // mkdir answers ENOENT under /proc although the parent exists: Node's recursive mkdir looped on it for ever.
        cli(['migrate'], { DATABASE_URL: 'sqlite:/proc/no-such-dir/parley.db' }),
      ]);
      assert.equal(serve.code, 1);
      assert.match(serve.stderr, new RegExp(`cannot open the database postgres://app:\\*\\*\\*@127\\.0\\.0\\.1:${port}/test \\(DATABASE_URL\\): connect ECONNREFUSED`));
      assert.equal(migrate.code, 1);
      assert.match(migrate.stderr, /cannot open the database \S+\/no_such_database_here \(DATABASE_URL\): database "no_such_database_here" does not exist/);
      assert.equal(file.code, 1);
      assert.ok(oneJson(file).error.startsWith(`cannot open the database sqlite:${notADirectory}/sub/parley.db (DATABASE_URL): ENOTDIR`), file.stdout);
      assert.equal(migration.code, 1);
      assert.match(migration.stderr, /cannot open the database \S+clash\.db \(DATABASE_URL\): migration 0001_foundation failed: table "accounts" already exists/);
      assert.equal(proc.code, 1);
      assert.match(proc.stderr, /cannot open the database sqlite:\/proc\/no-such-dir\/parley\.db \(DATABASE_URL\): ENOENT/);
      for (const r of [serve, migrate, file, migration, proc]) assert.doesNotMatch(r.stderr, /unexpected error|Sup3rSecret|at \S+:\d+/);
      rmSync(dir, { recursive: true, force: true });
    });

    test('serve that cannot listen says why, naming HOST and PORT, and exits', async () => {
      const busy = createServer(() => undefined);
      await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
      const port = String((busy.address() as AddressInfo).port);
      try {
        const started = Date.now();
        const r = await cli(['serve'], { DATABASE_URL: 'sqlite::memory:', PORT: port, LOG_LEVEL: 'silent' });
        assert.equal(r.code, 1);
        assert.match(r.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} \\(HOST, PORT\\): the port is already in use`));
        assert.doesNotMatch(r.stderr, /unexpected error|at \S+:\d+/);
        // The new, empty database gets no advice about accounts: the port is what is wrong.
        assert.doesNotMatch(r.stderr, /no account yet/);
        assert.ok(Date.now() - started < 15_000);
      } finally {
        busy.close();
      }
    });

    test('webhooks verify takes the body from --body, --body-file or stdin; keys create refuses an empty --scopes', async () => {
      const body = '{"event":"test"}';
      const signature = `sha256=${createHmac('sha256', 'secret123').update(body).digest('hex')}`;
      const dir = mkdtempSync(join(tmpdir(), 'parley-verify-'));
      try {
        writeFileSync(join(dir, 'body.json'), body);
        const [inline, file, missing, both] = await Promise.all([
          cli(['webhooks', 'verify', '--secret', 'secret123', '--signature', signature, '--body', body, '--json'], env),
          cli(['webhooks', 'verify', '--secret', 'secret123', '--signature', signature, '--body-file', join(dir, 'body.json')], env),
          cli(['webhooks', 'verify', '--secret', 's', '--signature', 'x', '--body-file', join(dir, 'nope.json')], env),
          cli(['webhooks', 'verify', '--secret', 's', '--signature', 'x', '--body', body, '--body-file', join(dir, 'body.json')], env),
        ]);
        assert.deepEqual(oneJson(inline), { ok: true });
        assert.equal(inline.code, 0);
        assert.equal(file.code, 0, file.stderr);
        assert.equal(missing.code, 2);
        assert.match(missing.stderr, /cannot read --body-file .*nope\.json: ENOENT/);
        assert.equal(both.code, 2);
        assert.match(both.stderr, /not both/);
        // A rotation: the signature may be the old secret's or the new one's; both are given.
        const [either, neither, empty] = await Promise.all([
          cli(['webhooks', 'verify', '--secret', 'new-secret', '--secret', 'secret123', '--signature', signature, '--body', body, '--json'], env),
          cli(['webhooks', 'verify', '--secret', 'new-secret', '--secret', 'other', '--signature', signature, '--body', body, '--json'], env),
          cli(['webhooks', 'verify', '--secret', 'new-secret', '--secret', '', '--signature', signature, '--body', body], env),
        ]);
        assert.deepEqual(oneJson(either), { ok: true });
        assert.deepEqual(oneJson(neither), { ok: false, reason: 'invalid_signature' });
        assert.equal(neither.code, 1);
        assert.equal(empty.code, 2);
        assert.match(empty.stderr, /--secret must not be empty/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const db = await freshDatabase('sqlite');
      try {
        const acct = oneJson(await cli(['accounts', 'create', '--name', 'A', '--plan', 'pro', '--json'], { DATABASE_URL: db.url }));
        const empty = await cli(['keys', 'create', '--account', acct.id, '--scopes', ''], { DATABASE_URL: db.url });
        assert.equal(empty.code, 2);
        assert.match(empty.stderr, /--scopes must list at least one scope/);
        const keys = oneJson(await cli(['keys', 'list', '--account', acct.id, '--json'], { DATABASE_URL: db.url }));
        assert.equal(keys.keys.length, 0, 'no key was created');
      } finally {
        await db.cleanup();
      }
    });

    test('unknown commands and flags are usage errors; --help prints usage', async () => {
      const [unknown, flag, help] = await Promise.all([cli(['frobnicate'], env), cli(['accounts', 'list', '--bogus'], env), cli(['--help'], env)]);
      assert.notEqual(unknown.code, 0);
      assert.match(unknown.stderr, /unknown command frobnicate/);
      assert.notEqual(flag.code, 0);
      assert.match(flag.stderr, /bogus/);
      assert.equal(help.code, 0);
      assert.match(help.stdout, /parley accounts create --name NAME --plan free\|pro\|business\|enterprise/);
    });

    test('--version (-v) prints the package version, alone or with --json', async () => {
      const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
      const [text, short, json] = await Promise.all([cli(['--version'], env), cli(['-v'], env), cli(['--version', '--json'], env)]);
      for (const r of [text, short]) {
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stdout, `parley ${version}\n`);
      }
      assert.deepEqual(oneJson(json), { version });
    });

    test('stray words, options a command does not take, an option given twice and a missing command are refused (exit 2), not ignored', async () => {
      const cases: Array<[string[], RegExp]> = [
        [['serve', 'no-worker', '--json'], /^parley serve takes no argument "no-worker"/],
        [['serve', 'extra-arg', '--json'], /^parley serve takes no argument "extra-arg"/],
        [['migrate', '--name', 'x', '--json'], /^parley migrate takes no --name/],
        [['migrate', '--force', '--json'], /^parley migrate takes no --force/],
        [['keys', 'revoke', 'key_a', 'key_b', '--json'], /^parley keys revoke takes no argument "key_b"/],
        [['--json'], /^a command is required/],
        // parseArgs would keep the last one: the first scope, account or name silently dropped
        [['keys', 'create', '--account', 'acct_a', '--scopes', 'documents:read', '--scopes', 'faqs:read', '--json'], /^--scopes is given more than once/],
        [['accounts', 'create', '--name', 'One', '--name', 'Two', '--plan', 'pro', '--json'], /^--name is given more than once/],
      ];
      const runs = await Promise.all(cases.map(([args]) => cli(args, env)));
      runs.forEach((r, i) => {
        assert.equal(r.code, 2, `${cases[i]![0].join(' ')}: ${r.stderr}`);
        assert.match(oneJson(r).error, cases[i]![1]);
      });
      const bare = await cli([], env);
      assert.equal(bare.code, 2);
      assert.equal(bare.stdout, '', 'nothing on stdout');
      assert.match(bare.stderr, /Usage:[\s\S]*a command is required/);
    });

    test('init takes the enterprise plan with its two limits', async () => {
      const db = await freshDatabase('sqlite');
      try {
        const r = await cli(['init', '--plan', 'enterprise', '--rate-limit-minute', '5', '--rate-limit-day', '10', '--json'], { DATABASE_URL: db.url });
        assert.equal(r.code, 0, r.stderr);
        const { account } = oneJson(r);
        assert.deepEqual([account.plan, account.rateLimitMinute, account.rateLimitDay], ['enterprise', 5, 10]);
      } finally {
        await db.cleanup();
      }
    });
  });
}
