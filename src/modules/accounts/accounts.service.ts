import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely, Transaction } from 'kysely';
import type { DialectName } from '../../db/database.js';
import { lockForCheckThenWrite } from '../../db/locks.js';
import type { DB } from '../../db/schema.js';
import type { Clock } from '../../lib/clock.js';
import { toIso } from '../../lib/clock.js';
import { silentLogger, type Logger } from '../../lib/log.js';
import { writeTransaction } from '../../db/unit-of-work.js';
import { newId } from '../../lib/ids.js';
import { accountsRepository as repo, noOwnedRows, OWNED_TABLES, reportedCounts, type OwnedCounts } from './accounts.repository.js';
import { KEY_TYPES, PLAN_LIMITS, PLANS, SCOPES, type AuthContext, type KeyType, type Plan } from './accounts.schemas.js';

export class AccountsError extends Error {}

/** `initFirstAccount` found accounts already: nothing was created. */
export class AccountsExistError extends AccountsError {
  constructor(readonly existing: { id: string; name: string }[]) {
    super(`this database already has ${existing.length === 1 ? 'an account' : `${existing.length} accounts`}`);
  }
}

/** The accounts' limit columns are 32-bit integers on PostgreSQL: a larger limit failed there as an unexpected error. */
const MAX_RATE_LIMIT = 2_147_483_647;

/** A name `accounts create` or `accounts update` was given, trimmed and not blank. */
function checkName(name: string) {
  if (name.length > 200) throw new AccountsError('--name must be at most 200 characters');
}

function checkPlan(plan: string): Plan {
  if (!(PLANS as readonly string[]).includes(plan)) throw new AccountsError(`--plan must be one of ${PLANS.join(', ')}`);
  return plan as Plan;
}

/**
 * The rate limits given for an account that is (or becomes) on `plan`: an enterprise account needs both, except those
 * it already has (`current`, when it is enterprise already); every other plan refuses them.
 */
function checkLimits(plan: Plan, given: { minute: number | undefined; day: number | undefined }, current: { minute: number; day: number } | null) {
  if (plan !== 'enterprise') {
    if (given.minute !== undefined || given.day !== undefined) {
      throw new AccountsError('--rate-limit-minute and --rate-limit-day are only accepted for the enterprise plan');
    }
    return;
  }
  for (const [flag, v] of [['--rate-limit-minute', given.minute], ['--rate-limit-day', given.day]] as const) {
    if (v === undefined) {
      if (current) continue;
      throw new AccountsError(`${flag} is required for the enterprise plan`);
    }
    if (!Number.isInteger(v) || v < 1) throw new AccountsError(`${flag} must be a positive integer`);
    if (v > MAX_RATE_LIMIT) throw new AccountsError(`${flag} must be at most ${MAX_RATE_LIMIT}`);
  }
}

/**
 * An account as the CLI prints it (`accounts create`, `list`, `update`): an enterprise account with its own limits;
 * one whose deletion started and has not finished (it was cut short) with the time it started.
 */
function accountView(r: Pick<DB['accounts'], 'id' | 'name' | 'plan' | 'rate_limit_minute' | 'rate_limit_day' | 'created_at'> & { deletion_started_at?: number | null }) {
  return {
    id: r.id,
    name: r.name,
    plan: r.plan,
    ...(r.plan === 'enterprise' ? { rateLimitMinute: r.rate_limit_minute, rateLimitDay: r.rate_limit_day } : {}),
    createdAt: toIso(r.created_at),
    ...(r.deletion_started_at != null ? { deletionStartedAt: toIso(r.deletion_started_at) } : {}),
  };
}

/** An account whose deletion started: nothing may be added to it or changed; the way on is to finish the deletion. */
export function refuseIfBeingDeleted(r: Pick<DB['accounts'], 'id' | 'deletion_started_at'>) {
  if (r.deletion_started_at === null) return;
  throw new AccountsError(
    `account ${r.id} is being deleted (since ${toIso(r.deletion_started_at)}); if that deletion was cut short, finish it: parley accounts delete ${r.id} --yes`,
  );
}

/** Rows of one table an account's deletion deletes per transaction (each chunk also takes the rows referencing them). */
export const DELETE_CHUNK_ROWS = 2_000;
/**
 * On SQLite the deletion waits between two chunks as long as the chunk took, within these bounds. A writer that found the
 * lock taken sleeps and tries again (SQLite's busy handler: 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 ms, then 100 ms
 * until its busy_timeout); a pause at least as long as its current sleep is one it cannot sleep through. So it gets the
 * lock in the pause after the chunk it waited on: 25 ms covers its sleeps while a chunk lasts under 78 ms, the chunk's
 * own length those of a longer one, and 200 ms all of them.
 */
const MIN_CHUNK_PAUSE_MS = 25;
const MAX_CHUNK_PAUSE_MS = 200;

export interface DeleteAccountOptions {
  /** Rows per chunk (DELETE_CHUNK_ROWS): tests make it small. */
  chunkRows?: number;
  /** Called after each chunk has committed, with how many have (a test's hook: `parley accounts delete` stops there). */
  afterChunk?: (chunks: number) => void | Promise<void>;
}

export interface UpdateAccountInput {
  name?: string | undefined;
  plan?: string | undefined;
  rateLimitMinute?: number | undefined;
  rateLimitDay?: number | undefined;
}

export const hashKey = (secret: string) => createHash('sha256').update(secret).digest('hex');

export interface CreateAccountInput {
  name: string;
  plan: string;
  rateLimitMinute?: number | undefined;
  rateLimitDay?: number | undefined;
}

/**
 * Verified keys are remembered for a short time so a request costs no key lookup: the lookup (hash, join,
 * parse) was a large share of a cheap request (bench/http/RESULTS.md). A revocation through this process
 * takes effect at once (the cache is cleared); one made elsewhere (the CLI, another node) or a plan change
 * within `authCacheTtlMs`. Unknown keys are never cached, so random keys cannot fill it. Entries are keyed by
 * the secret itself (held only in this process's memory, never written anywhere), so a hit costs no sha256:
 * hashing was 4% of a cached GET in the benchmark profile.
 */
function createKeyCache(clock: Clock, ttlMs: number, max = 10_000) {
  const entries = new Map<string, { auth: AuthContext; expires: number }>();
  return {
    get(secret: string) {
      if (ttlMs <= 0) return undefined;
      const e = entries.get(secret);
      if (!e) return undefined;
      if (e.expires <= clock.now()) {
        entries.delete(secret);
        return undefined;
      }
      return e.auth;
    },
    set(secret: string, auth: AuthContext) {
      if (ttlMs <= 0) return;
      if (entries.size >= max) entries.delete(entries.keys().next().value!);
      entries.set(secret, { auth, expires: clock.now() + ttlMs });
    },
    clear: () => entries.clear(),
    /** Forgets the keys of one account (its plan changed, or it was deleted, through this process). */
    forgetAccount(accountId: string) {
      for (const [secret, e] of entries) if (e.auth.accountId === accountId) entries.delete(secret);
    },
  };
}

export function createAccountsService(db: Kysely<DB>, clock: Clock, opts: { dialect: DialectName; authCacheTtlMs?: number; log?: Logger }) {
  const keyCache = createKeyCache(clock, opts.authCacheTtlMs ?? 0);
  const log = opts.log ?? silentLogger;
  const service = {
    async createAccount(input: CreateAccountInput, conn: Kysely<DB> | Transaction<DB> = db) {
      const name = input.name?.trim();
      if (!name) throw new AccountsError('--name is required');
      checkName(name);
      const plan = checkPlan(input.plan);
      checkLimits(plan, { minute: input.rateLimitMinute, day: input.rateLimitDay }, null);
      const now = clock.now();
      const row = {
        id: newId('acct', now),
        name,
        plan,
        rate_limit_minute: plan === 'enterprise' ? input.rateLimitMinute! : null,
        rate_limit_day: plan === 'enterprise' ? input.rateLimitDay! : null,
        assistant_settings: null,
        created_at: now,
        deletion_started_at: null,
      };
      await repo.insert(conn, row);
      return accountView(row);
    },

    /**
     * `parley init`: the first account and its server key, in one transaction under a lock, so two setup scripts
     * started together make one account (the second sees it and refuses) rather than two. `force` makes another.
     * An account being deleted does not count: it is unusable and on its way out (its deletion cut short, or still
     * running), and the refusal's advice (a key for it) could not be followed; init after deleting the only account is
     * setting up afresh.
     */
    async initFirstAccount(input: CreateAccountInput, force: boolean) {
      return db.transaction().execute(async (trx) => {
        await lockForCheckThenWrite(trx, opts.dialect, 'parley init');
        const existing = (await repo.list(trx)).filter((a) => a.deletion_started_at === null);
        if (existing.length > 0 && !force) throw new AccountsExistError(existing.map((a) => ({ id: a.id, name: a.name })));
        const account = await service.createAccount(input, trx);
        const key = await service.createKey({ accountId: account.id }, trx);
        return { account, key };
      });
    },

    async listAccounts() {
      const rows = await repo.list(db);
      return rows.map(accountView);
    },

    /**
     * `parley accounts update`: the fields given, checked as `createAccount` checks them against the plan the account
     * ends up on. An account that leaves enterprise loses its own limits (its plan's apply). Read and written under the
     * account row's lock, so two updates cannot each keep the other's old plan or limits. Running nodes see the change
     * when their key cache forgets the account's keys (AUTH_CACHE_TTL); this process's cache forgets them at once.
     */
    async updateAccount(id: string, input: UpdateAccountInput) {
      if (input.name === undefined && input.plan === undefined && input.rateLimitMinute === undefined && input.rateLimitDay === undefined) {
        throw new AccountsError('nothing to change: give --name, --plan, --rate-limit-minute or --rate-limit-day');
      }
      let name: string | undefined;
      if (input.name !== undefined) {
        name = input.name.trim();
        if (!name) throw new AccountsError('--name must not be blank');
        checkName(name);
      }
      const newPlan = input.plan === undefined ? undefined : checkPlan(input.plan);
      const { before, after } = await writeTransaction(db, async (trx) => {
        await repo.lockAccount(trx, id);
        const row = await repo.findById(trx, id);
        if (!row) throw new AccountsError(`account ${id} not found`);
        refuseIfBeingDeleted(row);
        const plan = newPlan ?? row.plan;
        const current = row.plan === 'enterprise' && row.rate_limit_minute !== null && row.rate_limit_day !== null ? { minute: row.rate_limit_minute, day: row.rate_limit_day } : null;
        checkLimits(plan, { minute: input.rateLimitMinute, day: input.rateLimitDay }, current);
        const next = {
          name: name ?? row.name,
          plan,
          rate_limit_minute: plan === 'enterprise' ? (input.rateLimitMinute ?? current!.minute) : null,
          rate_limit_day: plan === 'enterprise' ? (input.rateLimitDay ?? current!.day) : null,
        };
        await repo.update(trx, id, next);
        return { before: row, after: { ...row, ...next } };
      });
      keyCache.forgetAccount(id);
      const changed = (['name', 'plan', 'rate_limit_minute', 'rate_limit_day'] as const).filter((k) => before[k] !== after[k]);
      log.info(
        { accountId: id, changed: Object.fromEntries(changed.map((k) => [k, { from: before[k], to: after[k] }])) },
        changed.length ? 'account updated' : 'account update changed nothing',
      );
      return accountView(after);
    },

    /** What deleting the account would delete, per kind (`parley accounts delete` without --yes); what is left of it, once its deletion started. */
    async deletionPreview(id: string) {
      const row = await repo.findById(db, id);
      if (!row) throw new AccountsError(`account ${id} not found`);
      return { account: accountView(row), counts: await repo.countOwned(db, id) };
    },

    /**
     * `parley accounts delete --yes`: the account and every row it owns, for good (no soft delete, no undo: a backup is
     * the way back). No webhook is told (the account's webhooks go with it); the log is.
     *
     * In many short transactions rather than one: on SQLite one transaction held the only write lock for as long as a
     * large account took to delete, and the service's writes failed past their busy_timeout meanwhile. So:
     * 1. One transaction marks the account (deletion_started_at). From its commit the account is unusable: its keys
     *    answer 401 (authenticate; a node that cached one within AUTH_CACHE_TTL), the worker claims none of its
     *    deliveries (a delivery claimed before may still go out, as one in flight did before), ends none of its
     *    conversations, makes none of its rundowns, erases none for retention, and nothing adds to it (keys, demo,
     *    update). A run cut short (killed, a lost connection) leaves it so; the same command run again goes on.
     * 2. Chunks (deleteChunk) of at most `chunkRows` rows of one table each, in OWNED_TABLES' order, each its own
     *    transaction, until a chunk finds none (on PostgreSQL: none that another transaction does not hold, deleteChunk
     *    says why); on SQLite each followed by a pause (MIN_CHUNK_PAUSE_MS says how long), since a writer waiting on
     *    busy_timeout only tries again now and then and could otherwise find the lock taken again every time.
     * 3. One transaction, as the whole deletion was before: the account row locked (on PostgreSQL every insert of a
     *    row referencing it waits, then fails on the foreign key), then the rows other writes of the account lock
     *    first (lockOwnedRows), then whatever is left in every table (what was written during step 2 by a request
     *    already under way or a node's cached key) and the account row. A write in flight commits before and goes
     *    with the rest, or comes after and finds nothing to write to.
     *
     * Answers the rows this run deleted, per kind: with `resumed`, the deletion had been started by another run (one cut
     * short, or one still running), whose rows are not counted here. Two runs at once share the work, each row deleted
     * and counted by one of them (their counts add up to the account); the one that finds the row gone at step 3 says
     * so (`finishedByAnotherRun`) and answers what it deleted all the same. On PostgreSQL their chunks go down the same
     * tables side by side, each passing over the rows the other's holds (SKIP LOCKED): neither waits on the other's
     * chunk, except a chunk of a table whose rows others reference (conversations, rundowns) for the rows referencing
     * them that the other is deleting as it finishes that table, and step 3 for the other's chunk in flight. A run moves
     * on once the other holds all that is left of a table, and that chunk is the other's last there. SQLite's chunks
     * never collide.
     */
    async deleteAccount(id: string, options: DeleteAccountOptions = {}) {
      const chunkRows = options.chunkRows ?? DELETE_CHUNK_ROWS;
      const account = await writeTransaction(db, async (trx) => {
        await repo.lockAccount(trx, id);
        const row = await repo.findById(trx, id);
        if (!row) throw new AccountsError(`account ${id} not found`);
        if (row.deletion_started_at === null) await repo.markDeletionStarted(trx, id, clock.now());
        return row;
      });
      keyCache.forgetAccount(id);
      const resumed = account.deletion_started_at !== null;
      const about = { accountId: id, name: account.name, plan: account.plan };
      if (resumed) log.info({ ...about, deletionStartedAt: toIso(account.deletion_started_at!) }, 'account deletion resumed');
      else log.info(about, 'account deletion started');

      const counts = noOwnedRows();
      const add = (more: Partial<OwnedCounts>) => {
        for (const [kind, n] of Object.entries(more) as Array<[keyof OwnedCounts, number]>) counts[kind] += n;
      };
      let chunks = 0;
      for (const [, table] of OWNED_TABLES) {
        for (;;) {
          const began = performance.now();
          const deleted = await writeTransaction(db, (trx) => repo.deleteChunk(trx, id, table, chunkRows));
          if (!Object.values(deleted).some((n) => n > 0)) break;
          add(deleted);
          chunks++;
          await options.afterChunk?.(chunks);
          if (opts.dialect === 'sqlite') await sleep(Math.min(MAX_CHUNK_PAUSE_MS, Math.max(MIN_CHUNK_PAUSE_MS, Math.ceil(performance.now() - began))));
        }
      }
      const finishedByAnotherRun = await writeTransaction(db, async (trx) => {
        await repo.lockAccount(trx, id);
        if (!(await repo.findById(trx, id))) return true;
        const { deliveryIds } = await repo.lockOwnedRows(trx, id);
        add(await repo.deleteOwned(trx, id, deliveryIds));
        return false;
      });
      keyCache.forgetAccount(id);
      const reported = reportedCounts(counts);
      log.info({ ...about, counts: reported, chunks, resumed, finishedByAnotherRun }, 'account deleted');
      return { id, deleted: true as const, resumed, finishedByAnotherRun, counts: reported };
    },

    /**
     * Whether the account exists and is not being deleted (a request whose cached key outlived its account's
     * deletion, or its start: app.ts).
     */
    async accountUsable(id: string) {
      const row = await repo.findById(db, id);
      return row !== undefined && row.deletion_started_at === null;
    },

    async createKey(input: { accountId: string; type?: string; scopes?: string[] }, conn: Kysely<DB> | Transaction<DB> = db) {
      const account = await repo.findById(conn, input.accountId);
      if (!account) throw new AccountsError(`account ${input.accountId} not found`);
      refuseIfBeingDeleted(account);
      const type = (input.type ?? 'server') as KeyType;
      if (!KEY_TYPES.includes(type)) throw new AccountsError(`--type must be server or public`);
      if (type === 'server' && account.plan === 'free') {
        throw new AccountsError('server keys need the Pro plan or above; this account is on free (create a public key, or change the plan)');
      }
      let scopes: string[];
      if (type === 'public') {
        if (input.scopes && input.scopes.some((s) => s !== 'chat')) throw new AccountsError('a public key can only have the chat scope');
        scopes = ['chat'];
      } else {
        scopes = input.scopes && input.scopes.length ? [...new Set(input.scopes)] : [...SCOPES];
        const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
        if (unknown.length) throw new AccountsError(`unknown scope(s) ${unknown.join(', ')}; valid: ${SCOPES.join(', ')}`);
      }
      const secret = `${type === 'server' ? 'sk' : 'pk'}_${randomBytes(24).toString('base64url')}`;
      const now = clock.now();
      const id = newId('key', now);
      await repo.insertKey(conn, {
        id,
        account_id: account.id,
        type,
        scopes: JSON.stringify(scopes),
        hash: hashKey(secret),
        hint: secret.slice(0, 7),
        created_at: now,
        revoked_at: null,
      });
      return { id, key: secret, type, scopes, accountId: account.id, createdAt: toIso(now) };
    },

    async listKeys(accountId: string) {
      const account = await repo.findById(db, accountId);
      if (!account) throw new AccountsError(`account ${accountId} not found`);
      const rows = await repo.listKeys(db, accountId);
      return rows.map((r) => ({
        id: r.id,
        type: r.type,
        scopes: JSON.parse(r.scopes) as string[],
        hint: `${r.hint}…`,
        createdAt: toIso(r.created_at),
        revokedAt: r.revoked_at === null ? null : toIso(r.revoked_at),
      }));
    },

    async revokeKey(id: string) {
      const key = await repo.findKey(db, id);
      if (!key) throw new AccountsError(`key ${id} not found`);
      if (key.revoked_at === null) await repo.revokeKey(db, id, clock.now());
      keyCache.clear();
      const after = await repo.findKey(db, id);
      return { id, revoked: true, revokedAt: toIso(after!.revoked_at!) };
    },

    /** Resolves a bearer secret to its account, or null when unknown or revoked. */
    async authenticate(secret: string): Promise<AuthContext | null> {
      const cached = keyCache.get(secret);
      if (cached) return cached;
      const hash = hashKey(secret);
      const row = await repo.findActiveKeyByHash(db, hash);
      if (!row || row.revokedAt !== null || row.deletionStartedAt !== null) return null;
      const limits =
        row.plan === 'enterprise'
          ? { minute: row.rateLimitMinute ?? 1, day: row.rateLimitDay ?? 1 }
          : PLAN_LIMITS[row.plan];
      const auth: AuthContext = {
        accountId: row.accountId,
        plan: row.plan,
        limits,
        keyId: row.keyId,
        keyType: row.keyType,
        scopes: new Set(JSON.parse(row.scopes) as string[]),
      };
      keyCache.set(secret, auth);
      return auth;
    },

    /** The key as remembered by the cache, without waiting: undefined when it must be looked up. */
    cachedAuth(secret: string): AuthContext | undefined {
      return keyCache.get(secret);
    },

    /** Drops remembered keys, e.g. after changing a plan or revoking a key outside this service. */
    forgetCachedKeys() {
      keyCache.clear();
    },

    /** Drops the remembered keys of one account. */
    forgetAccountKeys(accountId: string) {
      keyCache.forgetAccount(accountId);
    },
  };
  return service;
}

export type AccountsService = ReturnType<typeof createAccountsService>;
