import { createHash, randomBytes } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { DialectName } from '../../db/database.js';
import { lockForCheckThenWrite } from '../../db/locks.js';
import type { DB } from '../../db/schema.js';
import type { Clock } from '../../lib/clock.js';
import { toIso } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { accountsRepository as repo } from './accounts.repository.js';
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
  };
}

export function createAccountsService(db: Kysely<DB>, clock: Clock, opts: { dialect: DialectName; authCacheTtlMs?: number }) {
  const keyCache = createKeyCache(clock, opts.authCacheTtlMs ?? 0);
  const service = {
    async createAccount(input: CreateAccountInput, conn: Kysely<DB> | Transaction<DB> = db) {
      const name = input.name?.trim();
      if (!name) throw new AccountsError('--name is required');
      if (name.length > 200) throw new AccountsError('--name must be at most 200 characters');
      if (!(PLANS as readonly string[]).includes(input.plan)) {
        throw new AccountsError(`--plan must be one of ${PLANS.join(', ')}`);
      }
      const plan = input.plan as Plan;
      const custom = input.rateLimitMinute !== undefined || input.rateLimitDay !== undefined;
      if (plan === 'enterprise') {
        for (const [flag, v] of [['--rate-limit-minute', input.rateLimitMinute], ['--rate-limit-day', input.rateLimitDay]] as const) {
          if (v === undefined) throw new AccountsError(`${flag} is required for the enterprise plan`);
          if (!Number.isInteger(v) || v < 1) throw new AccountsError(`${flag} must be a positive integer`);
          if (v > MAX_RATE_LIMIT) throw new AccountsError(`${flag} must be at most ${MAX_RATE_LIMIT}`);
        }
      } else if (custom) {
        throw new AccountsError('--rate-limit-minute and --rate-limit-day are only accepted for the enterprise plan');
      }
      const now = clock.now();
      const row = {
        id: newId('acct', now),
        name,
        plan,
        rate_limit_minute: plan === 'enterprise' ? input.rateLimitMinute! : null,
        rate_limit_day: plan === 'enterprise' ? input.rateLimitDay! : null,
        assistant_settings: null,
        created_at: now,
      };
      await repo.insert(conn, row);
      return {
        id: row.id,
        name,
        plan,
        ...(plan === 'enterprise' ? { rateLimitMinute: row.rate_limit_minute, rateLimitDay: row.rate_limit_day } : {}),
        createdAt: toIso(now),
      };
    },

    /**
     * `parley init`: the first account and its server key, in one transaction under a lock, so two setup scripts
     * started together make one account (the second sees it and refuses) rather than two. `force` makes another.
     */
    async initFirstAccount(input: CreateAccountInput, force: boolean) {
      return db.transaction().execute(async (trx) => {
        await lockForCheckThenWrite(trx, opts.dialect, 'parley init');
        const existing = await repo.list(trx);
        if (existing.length > 0 && !force) throw new AccountsExistError(existing.map((a) => ({ id: a.id, name: a.name })));
        const account = await service.createAccount(input, trx);
        const key = await service.createKey({ accountId: account.id }, trx);
        return { account, key };
      });
    },

    async listAccounts() {
      const rows = await repo.list(db);
      // As `accounts create` prints an account: an enterprise account's own limits with it.
      return rows.map((r) => ({
        id: r.id,
        name: r.name,
        plan: r.plan,
        ...(r.plan === 'enterprise' ? { rateLimitMinute: r.rate_limit_minute, rateLimitDay: r.rate_limit_day } : {}),
        createdAt: toIso(r.created_at),
      }));
    },

    async createKey(input: { accountId: string; type?: string; scopes?: string[] }, conn: Kysely<DB> | Transaction<DB> = db) {
      const account = await repo.findById(conn, input.accountId);
      if (!account) throw new AccountsError(`account ${input.accountId} not found`);
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
      if (!row || row.revokedAt !== null) return null;
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
  };
  return service;
}

export type AccountsService = ReturnType<typeof createAccountsService>;
