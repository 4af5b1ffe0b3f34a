import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfig, ConfigError, type Config } from '../config.js';
import { createContext } from '../context.js';
import { BackupError, backupSqlite } from '../db/backup.js';
import { CopyError } from '../db/copy.js';
import { copyCommand } from './copy.js';
import { sqliteFileOf } from '../db/database.js';
import type { ProcessClock } from '../db/server-clock.js';
import { openClock, openMigrated } from './database.js';
import { createLogger, type Logger } from '../lib/log.js';
import { AccountsError, AccountsExistError } from '../modules/accounts/accounts.service.js';
import { verifyDelivery } from '../modules/webhooks/signing.js';
import { runDemo } from './demo.js';

const HELP = `parley — conversational support service

Usage:
  parley serve [--no-worker]          API (and, unless --no-worker, the background worker)
  parley worker                       background worker only (webhook deliveries, timers);
                                      METRICS_PORT serves its /metrics
  parley migrate                      apply database migrations
  parley check                        is this installation healthy? checks the database, its
                                      migrations, the disk (SQLite), Redis and the LLM (when
                                      set), the webhook queue and unfinished account deletions;
                                      one line each: ok, warn or fail, and what to do. Reads
                                      only: migrates and changes nothing. Exit 1 if one fails
  parley init [--name NAME] [--plan pro] [--force]
             [--rate-limit-minute N --rate-limit-day N]   (the limits: enterprise only)
                                      create a first account and a server key (printed once);
                                      refused once an account exists, unless --force
  parley demo [--account ID]          load a sample knowledge base into an account (the only one
                                      when --account is left out; what the account already
                                      has, by title or question, is skipped)
  parley backup --to FILE             copy the SQLite database, while it serves, to a new file
                                      (PostgreSQL: use pg_dump)
  parley copy --from URL              copy every row of the database at URL into DATABASE_URL,
                                      which must be empty (SQLite to PostgreSQL when one machine
                                      is not enough, or back); stop the nodes writing to URL first
  parley accounts create --name NAME --plan free|pro|business|enterprise
                         [--rate-limit-minute N --rate-limit-day N]
  parley accounts list
  parley accounts update ID [--name NAME] [--plan free|pro|business|enterprise]
                         [--rate-limit-minute N] [--rate-limit-day N]
                                      change an account (the limits: enterprise only; leaving
                                      enterprise drops them); running nodes apply it within
                                      AUTH_CACHE_TTL
  parley accounts delete ID --yes     delete the account and everything it owns, for good (no
                                      undo: back up first), a few thousand rows at a time; run
                                      again, finishes a deletion that was cut short; without
                                      --yes, counts what would go
  parley keys create --account ID [--type server|public] [--scopes a,b,...]
  parley keys list --account ID
  parley keys revoke ID
  parley webhooks verify --secret S [--secret OLD] --signature sha256=H [--body B | --body-file F]
                                      check a received delivery's X-Service-Signature
                                      (body from B, F, or stdin); prints ok or fail, exit 0 or 1;
                                      during a secret rotation give both secrets: either may match

Every command accepts --json (one JSON object on stdout, nothing else there).
parley --version prints the version; parley --help this text.
Configuration comes from the environment: see README.md.`;

/** Bad usage: exit 2. `details` go into the `--json` answer beside `error`. */
class UsageError extends Error {
  constructor(
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

function readBodyFile(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new UsageError(`cannot read --body-file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** `3 documents, 0 faqs, …`: what an account's deletion removes (or would), kind by kind. */
function describeCounts(counts: Record<string, number>): string {
  return Object.entries(counts)
    .map(([kind, n]) => `${n} ${kind}`)
    .join(', ');
}

function intFlag(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n)) throw new UsageError(`--${name} must be a positive integer`);
  return n;
}

/**
 * What each command takes: its options (besides --json and --help) and how many words follow the command and
 * sub-command. Anything else is refused, so a forgotten `--` (`serve no-worker`) or a mistyped option is not
 * silently ignored.
 */
const USAGE: Record<string, { options: readonly string[]; args?: number }> = {
  serve: { options: ['no-worker'] },
  worker: { options: [] },
  migrate: { options: [] },
  check: { options: [] },
  init: { options: ['name', 'plan', 'force', 'rate-limit-minute', 'rate-limit-day'] },
  demo: { options: ['account'] },
  backup: { options: ['to'] },
  copy: { options: ['from'] },
  'accounts create': { options: ['name', 'plan', 'rate-limit-minute', 'rate-limit-day'] },
  'accounts list': { options: [] },
  'accounts update': { options: ['name', 'plan', 'rate-limit-minute', 'rate-limit-day'], args: 1 },
  'accounts delete': { options: ['yes'], args: 1 },
  'keys create': { options: ['account', 'type', 'scopes'] },
  'keys list': { options: ['account'] },
  'keys revoke': { options: [], args: 1 },
  'webhooks verify': { options: ['secret', 'signature', 'body', 'body-file'] },
};
const WITH_SUBCOMMANDS = new Set(['accounts', 'keys', 'webhooks']);

function checkUsage(positionals: string[], given: Record<string, unknown>) {
  const [cmd, sub] = positionals;
  const name = WITH_SUBCOMMANDS.has(cmd!) ? `${cmd} ${sub ?? ''}`.trim() : cmd!;
  const usage = USAGE[name];
  // Unknown commands and sub-commands get their own messages below.
  if (!usage) return;
  const words = positionals.slice(name.split(' ').length);
  if (words.length > (usage.args ?? 0)) throw new UsageError(`parley ${name} takes no argument ${JSON.stringify(words[usage.args ?? 0])}; see parley --help`);
  for (const option of Object.keys(given)) {
    // Not given: undefined, or false for a flag (the defaults parseArgs fills in).
    if (option === 'json' || option === 'help' || option === 'version' || given[option] === undefined || given[option] === false || usage.options.includes(option)) continue;
    throw new UsageError(`parley ${name} takes no --${option}; see parley --help`);
  }
}

/**
 * For the commands that read or add rows: a new database is set up, an older version's is left to `parley migrate`.
 * `log`: the services log there (JSON lines on stderr, as `serve` does); silent without it.
 */
async function withContext<T>(config: Config, fn: (ctx: ReturnType<typeof createContext>) => Promise<T>, log?: Logger): Promise<T> {
  const { database } = await openMigrated(config, { migrate: 'new-only' });
  let time: ProcessClock | undefined;
  try {
    // The times these commands write (accounts, keys, a demo's documents) are ordered and compared with those the
    // running nodes write: told by the same clock as theirs.
    time = await openClock(database, log);
    return await fn(createContext(config, database, time.clock, log));
  } finally {
    time?.stop();
    await database.close();
  }
}

export async function main(argv: string[]): Promise<number> {
  const { values, positionals, tokens } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    tokens: true,
    options: {
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
      version: { type: 'boolean', short: 'v', default: false },
      'no-worker': { type: 'boolean', default: false },
      force: { type: 'boolean', default: false },
      yes: { type: 'boolean', default: false },
      name: { type: 'string' },
      plan: { type: 'string' },
      'rate-limit-minute': { type: 'string' },
      'rate-limit-day': { type: 'string' },
      account: { type: 'string' },
      type: { type: 'string' },
      scopes: { type: 'string' },
      secret: { type: 'string', multiple: true },
      body: { type: 'string' },
      signature: { type: 'string' },
      'body-file': { type: 'string' },
      to: { type: 'string' },
      from: { type: 'string' },
    },
  });
  const json = values.json ?? false;
  const out = (obj: Record<string, unknown>, text: string) => {
    process.stdout.write(json ? `${JSON.stringify(obj)}\n` : `${text}\n`);
  };
  const [cmd, sub, arg] = positionals;
  if (values.help) {
    process.stdout.write(json ? `${JSON.stringify({ help: HELP })}\n` : `${HELP}\n`);
    return 0;
  }
  if (values.version) {
    // The package's own file: ../../package.json from both src/cli (development) and dist/cli (the build).
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    out({ version }, `parley ${version}`);
    return 0;
  }
  if (!cmd) {
    if (!json) process.stderr.write(`${HELP}\n\n`);
    throw new UsageError('a command is required; parley --help lists them');
  }
  checkUsage(positionals, values);
  // parseArgs keeps the last of a repeated option: `--scopes a --scopes b` would drop `a` without a word.
  const seen = new Set<string>();
  for (const token of tokens) {
    if (token.kind !== 'option') continue;
    // --secret alone may be repeated: the secrets of a rotation, either of which may have signed (docs/webhooks.md).
    if (seen.has(token.name) && token.name !== 'secret') throw new UsageError(`--${token.name} is given more than once; give it once${token.name === 'scopes' ? ' (several scopes: --scopes a,b)' : ''}`);
    seen.add(token.name);
  }
  if (cmd === 'webhooks') {
    if (sub !== 'verify') throw new UsageError('usage: parley webhooks verify --secret S [--secret OLD] --signature sha256=H [--body B | --body-file F]');
    if (!values.secret?.length) throw new UsageError('--secret is required');
    if (values.secret.some((s) => s === '')) throw new UsageError('--secret must not be empty');
    if (!values.signature) throw new UsageError('--signature is required (the X-Service-Signature header value)');
    if (values.body !== undefined && values['body-file'] !== undefined) throw new UsageError('give the body with --body or --body-file, not both');
    // The raw bytes: any re-encoding of the body would change the HMAC.
    const body = values.body !== undefined ? Buffer.from(values.body, 'utf8') : values['body-file'] !== undefined ? readBodyFile(values['body-file']) : readFileSync(0);
    const r = verifyDelivery({ secret: values.secret, body, headers: { 'x-service-signature': values.signature } });
    out(r.ok ? { ok: true } : { ok: false, reason: r.reason }, r.ok ? 'ok' : `fail (${r.reason})`);
    return r.ok ? 0 : 1;
  }
  const config = loadConfig();

  switch (cmd) {
    // Loaded on demand: the HTTP stack is most of the start-up time, and the other commands never need it.
    case 'serve':
      await (await import('./serve.js')).serve(config, { worker: !values['no-worker'], json });
      return 0;
    case 'worker':
      await (await import('./serve.js')).runWorker(config, { json });
      return 0;
    case 'migrate': {
      const { database, applied } = await openMigrated(config);
      await database.close();
      out({ applied }, applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
      return 0;
    }
    case 'check':
      // Loaded on demand, as serve is: the Redis and HTTP clients are for these two commands only.
      return (await import('./check.js')).checkCommand(config, out);
    case 'init':
      // init makes a server key, which a free account cannot use: refuse before creating an account it would orphan.
      if (values.plan === 'free') {
        throw new UsageError('parley init creates a server key, which needs the pro plan or above; for a free account use `parley accounts create --plan free` and `parley keys create --type public`');
      }
      return withContext(config, async (ctx) => {
        // init sets up the first account; run again (a setup script, a second try) it must not make another.
        let created;
        try {
          created = await ctx.services.accounts.initFirstAccount(
            {
              name: values.name ?? 'My company',
              plan: values.plan ?? 'pro',
              rateLimitMinute: intFlag('rate-limit-minute', values['rate-limit-minute']),
              rateLimitDay: intFlag('rate-limit-day', values['rate-limit-day']),
            },
            values.force ?? false,
          );
        } catch (err) {
          if (!(err instanceof AccountsExistError)) throw err;
          const first = err.existing[err.existing.length - 1]!;
          throw new UsageError(
            `${err.message} (${first.id}, ${first.name}${err.existing.length > 1 ? ', …' : ''}); ` +
              `nothing was created. parley init only sets up the first one: use \`parley keys create --account ${first.id}\` for a new key, ` +
              '`parley accounts create` for another account, or `parley init --force` to create one anyway',
          );
        }
        const { account, key } = created;
        out(
          { account, key },
          `Created account ${account.id} (${account.name}, plan ${account.plan}).\n` +
            `Server API key (shown once, store it now):\n\n  ${key.key}\n\n` +
            `Try: curl -H "Authorization: Bearer ${key.key}" http://${config.host}:${config.port}/v1/documents`,
        );
        return 0;
      });
    case 'demo': {
      return withContext(config, async (ctx) => {
        // CONTRACT §1 names the command bare (`parley demo`): right after `parley init` there is one account,
        // and that is the one meant. With none or several, say what to do rather than guess. An account being deleted
        // is not one (init does not count it either).
        let accountId = values.account;
        if (!accountId) {
          const accounts = (await ctx.services.accounts.listAccounts()).filter((a) => !a.deletionStartedAt);
          if (accounts.length === 0) throw new UsageError('the database has no account yet; create one with `parley init` first');
          if (accounts.length > 1) {
            throw new UsageError(
              `--account is required: this database has ${accounts.length} accounts (${accounts.map((a) => a.id).join(', ')})`,
            );
          }
          accountId = accounts[0]!.id;
        }
        const loaded = await runDemo(ctx, accountId);
        const { skipped } = loaded;
        const note =
          skipped.documents + skipped.faqs > 0
            ? `\nSkipped ${skipped.documents} documents and ${skipped.faqs} FAQs the account already has (same title or question).`
            : '';
        out(loaded, `Loaded ${loaded.documents} documents and ${loaded.faqs} FAQs into ${accountId}.${note}`);
        return 0;
      });
    }
    case 'backup': {
      if (!values.to) throw new UsageError('--to is required: the new file to write the backup to');
      const file = sqliteFileOf(config.databaseUrl);
      if (file === null) {
        throw new UsageError('parley backup copies the embedded SQLite database; for PostgreSQL use pg_dump (see README.md, Backups)');
      }
      if (file === ':memory:') throw new UsageError('an in-memory database has nothing to back up');
      const copied = backupSqlite(file, values.to);
      out(copied, `Backed up ${file} to ${copied.path} (${copied.bytes} bytes, ${copied.durationMs} ms).`);
      return 0;
    }
    case 'copy':
      return copyCommand(config, values.from, out);
    case 'accounts':
      if ((sub === 'update' || sub === 'delete') && !arg) throw new UsageError(`usage: parley accounts ${sub} ACCOUNT_ID …; see parley --help`);
      if (sub === 'update' && [values.name, values.plan, values['rate-limit-minute'], values['rate-limit-day']].every((v) => v === undefined)) {
        throw new UsageError('nothing to change: give --name, --plan, --rate-limit-minute or --rate-limit-day');
      }
      return withContext(config, async (ctx) => {
        if (sub === 'create') {
          const account = await ctx.services.accounts.createAccount({
            name: values.name ?? '',
            plan: values.plan ?? '',
            rateLimitMinute: intFlag('rate-limit-minute', values['rate-limit-minute']),
            rateLimitDay: intFlag('rate-limit-day', values['rate-limit-day']),
          });
          out(account, `Created account ${account.id} (${account.name}, plan ${account.plan}).`);
          return 0;
        }
        if (sub === 'list') {
          const accounts = await ctx.services.accounts.listAccounts();
          const deleting = (a: (typeof accounts)[number]) =>
            a.deletionStartedAt ? `  (being deleted since ${a.deletionStartedAt}; if that run was cut short: parley accounts delete ${a.id} --yes)` : '';
          out({ accounts }, accounts.map((a) => `${a.id}  ${a.plan.padEnd(10)}  ${a.name}${deleting(a)}`).join('\n') || 'no accounts');
          return 0;
        }
        if (sub === 'update') {
          const account = await ctx.services.accounts.updateAccount(arg!, {
            name: values.name,
            plan: values.plan,
            rateLimitMinute: intFlag('rate-limit-minute', values['rate-limit-minute']),
            rateLimitDay: intFlag('rate-limit-day', values['rate-limit-day']),
          });
          const limits = account.plan === 'enterprise' ? `, ${account.rateLimitMinute}/minute, ${account.rateLimitDay}/day` : '';
          out(account, `Updated account ${account.id} (${account.name}, plan ${account.plan}${limits}).`);
          return 0;
        }
        if (sub === 'delete') {
          // Deleting is for good: without --yes, say what would go and how to confirm, and change nothing.
          if (!values.yes) {
            const { account, counts } = await ctx.services.accounts.deletionPreview(arg!);
            const started = account.deletionStartedAt
              ? `Its deletion started at ${account.deletionStartedAt} and has not finished (cut short, or still running): the account is unusable until it does. `
              : '';
            throw new UsageError(
              `refusing to delete account ${account.id} (${account.name}, plan ${account.plan}) without --yes. ${started}` +
                `It would delete, for good (there is no undo: back up first, README.md Backups): ${describeCounts(counts)}. ` +
                `To delete it: parley accounts delete ${account.id} --yes`,
              { id: account.id, deleted: false, counts, ...(account.deletionStartedAt ? { deletionStartedAt: account.deletionStartedAt } : {}) },
            );
          }
          const stopAfter = config.testAccountDeleteStopAfter;
          const r = await ctx.services.accounts.deleteAccount(arg!, {
            ...(stopAfter !== null ? { afterChunk: (n: number) => void (n === stopAfter && process.kill(process.pid, 'SIGSTOP')) } : {}),
          });
          // Another run of this command may have started the deletion (and been cut short, or still be running) or
          // finished it meanwhile: say which, since the counts are then only this run's share.
          out(
            r,
            r.finishedByAnotherRun
              ? `Account ${r.id} is deleted: another run of parley accounts delete, at the same time, deleted its last rows; this run deleted: ${describeCounts(r.counts)}.`
              : r.resumed
                ? `Finished deleting account ${r.id}, whose deletion another run had started (cut short, or still running); this run deleted: ${describeCounts(r.counts)}.`
                : `Deleted account ${r.id} and everything it owned: ${describeCounts(r.counts)}.`,
          );
          return 0;
        }
        throw new UsageError('usage: parley accounts create|list|update|delete');
      }, sub === 'update' || sub === 'delete' ? createLogger(config.logLevel) : undefined);
    case 'keys':
      return withContext(config, async (ctx) => {
        if (sub === 'create') {
          if (!values.account) throw new UsageError('--account is required');
          const scopes = values.scopes?.split(',').map((s) => s.trim()).filter(Boolean);
          // An empty list is a mistake, not a request for every scope (leaving --scopes out is).
          if (scopes && scopes.length === 0) throw new UsageError('--scopes must list at least one scope; leave it out for all of them');
          const key = await ctx.services.accounts.createKey({ accountId: values.account, type: values.type, scopes });
          out(key, `Created ${key.type} key ${key.id} with scopes ${key.scopes.join(' ')}.\nSecret (shown once):\n\n  ${key.key}\n`);
          return 0;
        }
        if (sub === 'list') {
          if (!values.account) throw new UsageError('--account is required');
          const keys = await ctx.services.accounts.listKeys(values.account);
          out(
            { keys },
            keys.map((k) => `${k.id}  ${k.type.padEnd(6)}  ${k.hint}  ${k.revokedAt ? `revoked ${k.revokedAt}` : 'active'}`).join('\n') || 'no keys',
          );
          return 0;
        }
        if (sub === 'revoke') {
          if (!arg) throw new UsageError('usage: parley keys revoke KEY_ID');
          const r = await ctx.services.accounts.revokeKey(arg);
          out(r, `Revoked ${r.id}.`);
          return 0;
        }
        throw new UsageError('usage: parley keys create|list|revoke');
      });
    default:
      throw new UsageError(`unknown command ${cmd}; see parley --help`);
  }
}

export async function run(argv: string[]) {
  const json = argv.includes('--json');
  try {
    process.exitCode = await main(argv);
  } catch (err) {
    const startup = (err as Error).name === 'StartupError';
    const known = err instanceof AccountsError || err instanceof UsageError || err instanceof BackupError || err instanceof CopyError || err instanceof ConfigError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    const message = known || startup ? (err as Error).message : `unexpected error: ${(err as Error).message}`;
    if (json) process.stdout.write(`${JSON.stringify({ error: message, ...(err instanceof UsageError ? err.details : {}) })}\n`);
    process.stderr.write(`parley: ${message}\n`);
    // A failed command ends the process, whatever it left open (a pool, a timer): `serve` must not linger.
    process.exit(known ? 2 : 1);
  }
}

// `node --import tsx src/cli/main.ts …` (tests, development) runs the CLI like bin/parley.js does.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await run(process.argv.slice(2));
