import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingHttpHeaders } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import { openDatabase, type Database, type DialectName } from '../../src/db/database.js';
import { migrations } from '../../src/db/migrations/index.js';
import { systemClock } from '../../src/lib/clock.js';
import { accountsRepository } from '../../src/modules/accounts/accounts.repository.js';
import { assertBuildIsFresh, cli, ENTRY, freshDatabase, oneJson } from './cli-suite.js';

const KNOWN = Object.keys(migrations);

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A TCP server that takes connections and never says a word: a peer that stopped answering. */
async function silentServer() {
  const sockets: import('node:net').Socket[] = [];
  const s = createServer((socket) => void sockets.push(socket));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    port: (s.address() as AddressInfo).port,
    close() {
      for (const socket of sockets) socket.destroy();
      s.close();
    },
  };
}

/** `parley check --json`: its exit code, its checks by name, and everything it printed (for secrets that must not be there). */
async function check(env: Record<string, string>) {
  const r = await cli(['check', '--json'], env);
  const out = oneJson(r);
  assert.equal(typeof out.ok, 'boolean');
  assert.equal(out.ok, r.code === 0, `ok matches the exit code: ${r.stdout}`);
  for (const c of out.checks) {
    assert.deepEqual(Object.keys(c).sort(), ['detail', 'name', 'status']);
    assert.ok(['ok', 'warn', 'fail'].includes(c.status), c.status);
    assert.equal(typeof c.detail, 'string');
  }
  const byName = Object.fromEntries(out.checks.map((c: any) => [c.name, c])) as Record<string, { status: string; detail: string }>;
  return { code: r.code, names: out.checks.map((c: any) => c.name) as string[], byName, all: r.stdout + r.stderr };
}

/** A new database at this version's migrations, with one account; `with` gets this process's connections to it. */
async function migratedDatabase(dialect: DialectName) {
  const db = await freshDatabase(dialect);
  const env = { DATABASE_URL: db.url };
  const m = await cli(['migrate'], env);
  assert.equal(m.code, 0, m.stderr);
  return {
    env,
    async with<T>(fn: (database: Database) => Promise<T>): Promise<T> {
      const database = openDatabase(db.url, { poolSize: 2 });
      try {
        return await fn(database);
      } finally {
        await database.close();
      }
    },
    cleanup: () => db.cleanup(),
  };
}

export function checkSuite(dialect: DialectName) {
  describe(`parley check (${dialect})`, () => {
    const dbChecks = dialect === 'sqlite' ? ['database', 'migrations', 'journal_mode', 'synchronous', 'disk_space', 'webhook_queue', 'accounts'] : ['database', 'migrations', 'webhook_queue', 'accounts'];

    test('a healthy installation: every check ok, exit 0, one line per check (status first), and nothing is changed', async () => {
      assertBuildIsFresh();
      const db = await migratedDatabase(dialect);
      try {
        // An empty database: told to make an account, a warning only.
        const empty = await check(db.env);
        assert.equal(empty.code, 0, empty.all);
        assert.equal(empty.byName.accounts!.status, 'warn');
        assert.match(empty.byName.accounts!.detail, /no account yet: `parley init`/);

        const acct = oneJson(await cli(['accounts', 'create', '--name', 'Healthy', '--plan', 'pro', '--json'], db.env));
        const r = await check(db.env);
        assert.equal(r.code, 0, r.all);
        assert.deepEqual(r.names, dbChecks, 'no redis or llm check without REDIS_URL and LLM_BASE_URL');
        for (const name of dbChecks) assert.equal(r.byName[name]!.status, 'ok', `${name}: ${r.byName[name]!.detail}`);
        assert.match(r.byName.database!.detail, dialect === 'sqlite' ? /^SQLite 3\.\d+\.\d+, file \/\S+parley\.db; round trip \d+(\.\d)? ms$/ : /^PostgreSQL \d+\.\d+.* at postgres:\/\/\S+, schema cli_\w+; round trip \d+(\.\d)? ms$/);
        assert.equal(r.byName.migrations!.detail, `${KNOWN.length} of this version's ${KNOWN.length} migrations applied (latest ${KNOWN.at(-1)})`);
        assert.match(r.byName.webhook_queue!.detail, /^no delivery due; 0 scheduled for later, 0 being attempted, 0 webhooks disabled$/);
        assert.equal(r.byName.accounts!.detail, '1 account, no deletion unfinished');
        if (dialect === 'sqlite') {
          assert.match(r.byName.journal_mode!.detail, /^wal/);
          assert.match(r.byName.synchronous!.detail, /^full \(SQLITE_SYNCHRONOUS\)/);
          assert.match(r.byName.disk_space!.detail, /^\d+(\.\d)? (GiB|MiB) free on the filesystem of \//);
          const normal = await check({ ...db.env, SQLITE_SYNCHRONOUS: 'normal' });
          assert.equal(normal.byName.synchronous!.status, 'ok');
          assert.match(normal.byName.synchronous!.detail, /^normal \(SQLITE_SYNCHRONOUS=normal\): .*survives a crash of the process, not of the OS/);
        }

        const text = await cli(['check'], db.env);
        assert.equal(text.code, 0, text.stderr);
        const lines = text.stdout.trimEnd().split('\n');
        assert.equal(lines.length, dbChecks.length);
        lines.forEach((line, i) => assert.match(line, new RegExp(`^ok {4}${dbChecks[i]} +\\S`), line));
        assert.ok(acct.id);
      } finally {
        await db.cleanup();
      }
    });

    test('a pending migration warns (exit 0) with how to apply it, and is not applied; a newer version\'s migration fails (exit 1)', async () => {
      const db = await migratedDatabase(dialect);
      try {
        const last = KNOWN.at(-1)!;
        await db.with((d) => sql`delete from kysely_migration where name = ${last}`.execute(d.db));
        const pending = await check(db.env);
        assert.equal(pending.code, 0, pending.all);
        assert.equal(pending.byName.migrations!.status, 'warn');
        assert.equal(
          pending.byName.migrations!.detail,
          `${KNOWN.length - 1} of this version's ${KNOWN.length} migrations applied; pending: ${last}. \`parley serve\` and \`parley worker\` apply them at start; or run \`parley migrate\` ` +
            "(an upgrade: stop the older version's nodes and back up first, README.md Upgrading). The webhook queue and the accounts are checked once they are applied",
        );
        assert.deepEqual(pending.names, dbChecks.filter((n) => n !== 'webhook_queue' && n !== 'accounts'));
        const still = await db.with(async (d) => (await sql<{ n: number | string }>`select count(*) as n from kysely_migration where name = ${last}`.execute(d.db)).rows[0]!.n);
        assert.equal(Number(still), 0, 'parley check applied nothing');
        await db.with((d) => sql`insert into kysely_migration (name, timestamp) values (${last}, ${new Date().toISOString()})`.execute(d.db));

        await db.with((d) => sql`insert into kysely_migration (name, timestamp) values ('9999_from_a_newer_version', ${new Date().toISOString()})`.execute(d.db));
        const newer = await check(db.env);
        assert.equal(newer.code, 1, newer.all);
        assert.equal(newer.byName.migrations!.status, 'fail');
        assert.match(
          newer.byName.migrations!.detail,
          new RegExp(`^${KNOWN.length} of this version's ${KNOWN.length} migrations applied, and 9999_from_a_newer_version unknown to this version: a newer version of Parley migrated this database.*run that version, or restore the backup`),
        );
        // Every column this version reads is there: the rest is still checked.
        assert.equal(newer.byName.webhook_queue!.status, 'ok');
      } finally {
        await db.cleanup();
      }
    });

    test('a delivery due for over 5 minutes warns that no worker takes deliveries; an account whose deletion did not finish warns naming it', async () => {
      const db = await migratedDatabase(dialect);
      try {
        const { accountId, webhookId, gone } = await db.with(async (d) => {
          const ctx = createContext(loadConfig({ ...db.env, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }), d, systemClock);
          const accountId = (await ctx.services.accounts.createAccount({ name: 'Queue', plan: 'pro' })).id;
          const gone = (await ctx.services.accounts.createAccount({ name: 'Going', plan: 'pro' })).id;
          const hook = await ctx.services.webhooks.create(accountId, { url: 'http://127.0.0.1:9/hook', events: ['conversation.started'], secret: 'whsec_check_1' });
          return { accountId, webhookId: hook.id, gone };
        });
        const insertDue = (id: string, dueAgoMs: number) =>
          db.with(async (d) => {
            const now = Date.now();
            await d.db
              .insertInto('deliveries')
              .values({
                id, account_id: accountId, webhook_id: webhookId, event_id: null, event: 'conversation.started', url: 'http://127.0.0.1:9/hook',
                secret: 'whsec_check_1', body: '{}', status: 'pending', attempt_count: 0, auto_attempts: 0, next_attempt_at: now - dueAgoMs,
                lease_owner: null, lease_expires_at: null, created_at: now - dueAgoMs, updated_at: now - dueAgoMs,
              })
              .execute();
          });
        // Due a minute: a worker may simply be busy.
        await insertDue('dlv_check_recent', 60_000);
        const recent = await check(db.env);
        assert.equal(recent.byName.webhook_queue!.status, 'ok', recent.byName.webhook_queue!.detail);
        // Due 60 s at the insert, and older by the time the check's process has started (seconds on a loaded machine).
        const waited = /^1 delivery due, the oldest for (\d+) s; 0 scheduled for later/.exec(recent.byName.webhook_queue!.detail);
        assert.ok(waited && Number(waited[1]) >= 59 && Number(waited[1]) < 120, recent.byName.webhook_queue!.detail);

        await insertDue('dlv_check_stalled', 12 * 60_000);
        const stalled = await check(db.env);
        assert.equal(stalled.code, 0, 'a warning, not a failure');
        assert.equal(stalled.byName.webhook_queue!.status, 'warn');
        assert.match(
          stalled.byName.webhook_queue!.detail,
          /^2 deliveries due, the oldest for 12 min \(0 scheduled for later, 0 being attempted, 0 webhooks disabled\): no worker is taking deliveries: is `parley worker` or `parley serve` without --no-worker running\?$/,
        );
        assert.equal(stalled.byName.accounts!.status, 'ok');

        await db.with((d) => accountsRepository.markDeletionStarted(d.db, gone, Date.UTC(2026, 10, 25, 9)));
        const deleting = await check(db.env);
        assert.equal(deleting.code, 0);
        assert.equal(deleting.byName.accounts!.status, 'warn');
        assert.equal(
          deleting.byName.accounts!.detail,
          `the deletion of account ${gone} started at 2026-11-25T09:00:00.000Z and has not finished (cut short, or still running); it is unusable until it does: \`parley accounts delete ${gone} --yes\` finishes it`,
        );
        assert.ok(!deleting.byName.accounts!.detail.includes(accountId));
      } finally {
        await db.cleanup();
      }
    });
  });
}

/** What does not depend on the dialect: the database that cannot be opened, Redis, the LLM, usage, the disk. */
export function checkSuiteOnce() {
  describe('parley check: Redis, the LLM, a database that cannot be opened, usage', () => {
    test('a database that cannot be opened fails (exit 1) without its password; a missing SQLite file is not created', async () => {
      assertBuildIsFresh();
      const port = await closedPort();
      const silent = await silentServer();
      const dir = mkdtempSync(join(tmpdir(), 'parley-check-'));
      try {
        const started = Date.now();
        const [pg, hung, missing, memory] = await Promise.all([
          check({ DATABASE_URL: `postgres://app:Sup3rSecretPw@127.0.0.1:${port}/prod` }),
          check({ DATABASE_URL: `postgres://app:Sup3rSecretPw@127.0.0.1:${silent.port}/prod` }),
          check({ DATABASE_URL: `sqlite:${join(dir, 'none', 'parley.db')}` }),
          check({ DATABASE_URL: 'sqlite::memory:' }),
        ]);
        // A server that never answers: PostgreSQL's connection timeout (10 s), not a hang.
        assert.ok(Date.now() - started < 25_000, `took ${Date.now() - started} ms`);
        assert.equal(hung.code, 1);
        assert.match(hung.byName.database!.detail, /^cannot open the database postgres:\/\/app:\*\*\*@127\.0\.0\.1:\d+\/prod \(DATABASE_URL\): .*timeout/i);
        assert.doesNotMatch(hung.all, /Sup3rSecretPw/);
        assert.equal(pg.code, 1);
        assert.deepEqual(pg.names, ['database']);
        assert.match(pg.byName.database!.detail, new RegExp(`^cannot open the database postgres://app:\\*\\*\\*@127\\.0\\.0\\.1:${port}/prod \\(DATABASE_URL\\): .*ECONNREFUSED`));
        assert.doesNotMatch(pg.all, /Sup3rSecretPw/);
        assert.equal(missing.code, 1);
        assert.equal(missing.byName.database!.status, 'fail');
        assert.match(missing.byName.database!.detail, /^no database at \S+parley\.db \(DATABASE_URL\): nothing has set it up yet; `parley migrate`/);
        assert.ok(!existsSync(join(dir, 'none')), 'the check created nothing');
        assert.equal(memory.code, 0);
        assert.equal(memory.byName.database!.status, 'warn');
      } finally {
        silent.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    test('REDIS_URL: a closed port or a silent server fails (exit 1) without the password; a Redis that answers is ok', async () => {
      const db = await migratedDatabase('sqlite');
      const silent = await silentServer();
      try {
        await cli(['accounts', 'create', '--name', 'R', '--plan', 'pro'], db.env);
        const port = await closedPort();
        const started = Date.now();
        const [closed, hung, up] = await Promise.all([
          check({ ...db.env, REDIS_URL: `redis://:R3disSecretPw@127.0.0.1:${port}` }),
          check({ ...db.env, REDIS_URL: `redis://127.0.0.1:${silent.port}` }),
          check({ ...db.env, REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379' }),
        ]);
        assert.ok(Date.now() - started < 15_000);
        assert.equal(hung.code, 1);
        assert.match(hung.byName.redis!.detail, /^redis:\/\/127\.0\.0\.1:\d+ \(REDIS_URL\) did not answer PING: .*; each node will count rate limits on its own until it does$/);
        assert.equal(closed.code, 1, closed.all);
        assert.equal(closed.names.at(-1), 'redis');
        assert.equal(closed.byName.redis!.status, 'fail');
        assert.equal(
          closed.byName.redis!.detail,
          `redis://:***@127.0.0.1:${port} (REDIS_URL) did not answer PING: connect ECONNREFUSED 127.0.0.1:${port}; each node will count rate limits on its own until it does`,
        );
        assert.doesNotMatch(closed.all, /R3disSecretPw/);
        assert.equal(up.code, 0, up.all);
        assert.equal(up.byName.redis!.status, 'ok');
        assert.match(up.byName.redis!.detail, /^redis:\/\/\S+ answered PING in \d+(\.\d)? ms: the nodes share their rate-limit counters$/);
      } finally {
        silent.close();
        await db.cleanup();
      }
    });

    test('LLM_BASE_URL: /models answering 200 is ok, 404 warns, a closed port or no answer within LLM_TIMEOUT fails; the API key is sent, never printed', async () => {
      const db = await migratedDatabase('sqlite');
      const seen: Array<{ url: string | undefined; headers: IncomingHttpHeaders }> = [];
      let status = 200;
      const server = createHttpServer((req, res) => {
        seen.push({ url: req.url, headers: req.headers });
        if (req.url === '/silent/models') return; // never answers
        res.writeHead(status, { 'content-type': 'application/json' }).end(status === 200 ? '{"object":"list","data":[{"id":"gpt-4o-mini"}]}' : '{"error":"no such route"}');
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const KEY = 'sk-check-SECRET-key-0123456789';
      try {
        await cli(['accounts', 'create', '--name', 'L', '--plan', 'pro'], db.env);
        const answering = await check({ ...db.env, LLM_BASE_URL: `${base}/v1/`, LLM_API_KEY: KEY });
        assert.equal(answering.code, 0, answering.all);
        assert.equal(answering.byName.llm!.status, 'ok');
        assert.match(answering.byName.llm!.detail, new RegExp(`^GET ${base}/v1/models answered 200 in \\d+(\\.\\d)? ms$`));
        assert.equal(seen.at(-1)!.url, '/v1/models');
        assert.equal(seen.at(-1)!.headers.authorization, `Bearer ${KEY}`);

        status = 404;
        const missing = await check({ ...db.env, LLM_BASE_URL: `${base}/v1`, LLM_API_KEY: KEY });
        assert.equal(missing.code, 0, 'a warning, not a failure');
        assert.equal(missing.byName.llm!.status, 'warn');
        assert.match(missing.byName.llm!.detail, /answered 404 in .*Some servers have no \/models; the chat calls \/chat\/completions/);

        const port = await closedPort();
        const started = Date.now();
        const [closed, silent] = await Promise.all([
          check({ ...db.env, LLM_BASE_URL: `http://127.0.0.1:${port}/v1`, LLM_API_KEY: KEY }),
          check({ ...db.env, LLM_BASE_URL: `${base}/silent`, LLM_API_KEY: KEY, LLM_TIMEOUT: '1s' }),
        ]);
        assert.ok(Date.now() - started < 15_000, 'no hang');
        assert.equal(closed.code, 1);
        assert.equal(
          closed.byName.llm!.detail,
          `GET http://127.0.0.1:${port}/v1/models (LLM_BASE_URL) failed: connect ECONNREFUSED 127.0.0.1:${port}; customers get the built-in answerer until it answers`,
        );
        assert.equal(silent.code, 1);
        assert.equal(silent.byName.llm!.status, 'fail');
        assert.match(silent.byName.llm!.detail, /failed: no answer within 1 s \(LLM_TIMEOUT\); customers get the built-in answerer/);
        for (const r of [answering, missing, closed, silent]) assert.ok(!r.all.includes(KEY), 'the API key is never printed');
      } finally {
        server.closeAllConnections();
        server.close();
        await db.cleanup();
      }
    });

    test('usage: options and words it does not take are refused (exit 2); --help says it changes nothing', async () => {
      const env = { DATABASE_URL: 'sqlite::memory:' };
      const [name, word, bogus, help] = await Promise.all([
        cli(['check', '--name', 'x', '--json'], env),
        cli(['check', 'now', '--json'], env),
        cli(['check', '--bogus'], env),
        cli(['--help'], env),
      ]);
      assert.equal(name.code, 2);
      assert.match(oneJson(name).error, /^parley check takes no --name/);
      assert.equal(word.code, 2);
      assert.match(oneJson(word).error, /^parley check takes no argument "now"/);
      assert.equal(bogus.code, 2);
      assert.match(bogus.stderr, /bogus/);
      assert.match(help.stdout, /parley check {2,}is this installation healthy\?[\s\S]*Reads\s+only: migrates and changes nothing/);
    });

    // A real small disk: a tmpfs in a mount namespace of the child's own (as disk-full.test.ts).
    const dir = mkdtempSync(join(tmpdir(), 'parley-check-mnt-'));
    const canMount = spawnSync('unshare', ['-m', '--propagation', 'private', 'mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir]).status === 0;
    rmSync(dir, { recursive: true, force: true });
    test('free space on the SQLite file\'s filesystem: under 1 GiB warns, under 100 MiB fails, saying the figure', { skip: !canMount && 'needs to mount a tmpfs in a mount namespace (root or CAP_SYS_ADMIN)' }, async () => {
      const onDisk = (size: string) => {
        const mnt = mkdtempSync(join(tmpdir(), 'parley-check-mnt-'));
        try {
          const script = `mount -t tmpfs -o size=${size} tmpfs "$MNT" && "$NODE" "$ENTRY" migrate >/dev/null && exec "$NODE" "$ENTRY" check --json`;
          const r = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script], {
            env: { PATH: process.env.PATH ?? '', MNT: mnt, NODE: process.execPath, ENTRY, DATABASE_URL: `sqlite:${join(mnt, 'parley.db')}` },
            encoding: 'utf8',
          });
          const out = oneJson({ code: r.status, stdout: r.stdout, stderr: r.stderr });
          return { code: r.status, disk: out.checks.find((c: any) => c.name === 'disk_space') };
        } finally {
          rmSync(mnt, { recursive: true, force: true });
        }
      };
      const small = onDisk('500m');
      assert.equal(small.code, 0);
      assert.equal(small.disk.status, 'warn');
      assert.match(small.disk.detail, /^(499|500) MiB free on the filesystem of \S+, under 1 GiB: free space there or move the database to a larger disk/);
      const tiny = onDisk('50m');
      assert.equal(tiny.code, 1);
      assert.equal(tiny.disk.status, 'fail');
      assert.match(tiny.disk.detail, /^(49|50) MiB free on the filesystem of \S+: writes will soon fail/);
    });
  });
}
