import { AsyncLocalStorage } from 'node:async_hooks';
import { PostgresAdapter, type Kysely, type Transaction } from 'kysely';
import type { DB } from './schema.js';

/**
 * What a request's writes must carry with them: `beforeCommit` runs inside every write transaction the request
 * starts, as its last statement, so whatever it records commits exactly when the request's write does. The
 * Idempotency-Key layer uses it to mark its key "carried out" (src/http/idempotency.ts).
 */
export interface UnitOfWork {
  beforeCommit(trx: Transaction<DB>): Promise<void>;
}

const current = new AsyncLocalStorage<UnitOfWork>();
/** Units of work not yet ended. */
let open = 0;

/**
 * Runs `fn` (and everything it starts) with `uow` attached to its write transactions, until the returned `end`
 * is called (once the request is answered). While no unit of work is open the storage is disabled: on Node 20 an
 * enabled AsyncLocalStorage hooks every promise of the process, which cost list requests about 5% (measured with
 * autocannon, GET /v1/documents, interleaved runs), so requests without an Idempotency-Key pay nothing.
 */
export function openUnitOfWork(uow: UnitOfWork, fn: () => void): () => void {
  open++;
  current.run(uow, fn);
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    if (--open === 0) current.disable();
  };
}

/**
 * Runs `fn` outside any unit of work: its write transactions do not mark the request's key. For a write that is
 * only the start of what the request does (a test send's delivery row, before the send that its key stands for).
 */
export function outsideUnitOfWork<T>(fn: () => T): T {
  return current.exit(fn);
}

/** The unit of work of the code now running, if any; captured where work is queued to run elsewhere. */
export function currentUnitOfWork(): UnitOfWork | undefined {
  return current.getStore();
}

/** Wraps a transaction body so that it ends with the unit of work's `beforeCommit`. */
export function committingWith<T>(uow: UnitOfWork | undefined, fn: (trx: Transaction<DB>) => Promise<T>): (trx: Transaction<DB>) => Promise<T> {
  if (!uow) return fn;
  return async (trx) => {
    const value = await fn(trx);
    await uow.beforeCommit(trx);
    return value;
  };
}

/** Runs one write transaction body and answers its result once it is committed. */
export type Transact = <T>(fn: (trx: Transaction<DB>) => Promise<T>) => Promise<T>;

/** Databases whose write transactions go through a writer of their own: SQLite's group commit (db/group-commit.ts). */
const writers = new WeakMap<Kysely<DB>, Transact>();

/** Sends every `writeTransaction` on `db` through `writer` (which must apply the current unit of work itself). */
export function useWriter(db: Kysely<DB>, writer: Transact): void {
  writers.set(db, writer);
}

/**
 * Whether a write that is one statement may run on `db` outside a transaction: on PostgreSQL, where a statement is
 * atomic on its own (SQLite's writes go through its group commit), and with no unit of work, whose `beforeCommit`
 * must commit with the request's write.
 */
export function writesAlone(db: Kysely<DB>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter && currentUnitOfWork() === undefined;
}

/** What runs once a write transaction has committed, per transaction (see afterCommit). */
const commitHooks = new WeakMap<Kysely<DB>, Array<() => void>>();

/**
 * Runs `fn` once the write transaction `trx` has committed, and never if it rolls back. Only a transaction that
 * writeTransaction started has that moment: for any other, `fn` is not kept and false is answered, so the caller
 * chooses what to do instead.
 */
export function afterCommit(trx: Kysely<DB>, fn: () => void): boolean {
  const hooks = commitHooks.get(trx);
  if (!hooks) return false;
  hooks.push(fn);
  return true;
}

/**
 * PostgreSQL's answers that mean "this transaction lost a race and was rolled back, run it again": deadlock_detected
 * and serialization_failure. Nothing of it was written, so running the body again is safe.
 */
const RETRYABLE: Record<string, 'deadlock' | 'serialization'> = { '40P01': 'deadlock', '40001': 'serialization' };
/** Runs of one write transaction in all: the first and up to two more. */
const MAX_RUNS = 3;
/** Write transactions run again after a deadlock or a serialization failure, since start (GET /metrics reads them). */
export const transactionRetries = { deadlock: 0, serialization: 0 };

/**
 * A write transaction, with the current unit of work's `beforeCommit` before COMMIT: `db.transaction()`, or on
 * SQLite one job of the database's group commit, so the writes of concurrent requests share one commit (one sync).
 * Once it has committed, the `afterCommit` hooks its body registered run.
 *
 * On PostgreSQL a transaction the server rolled back as a deadlock's victim (or for a serialization failure) is run
 * again, after a short random pause, up to MAX_RUNS times: the lock orders known to deadlock were fixed where they
 * were found, and this keeps one that was not from reaching a client as a 500 or failing a worker's batch. Bodies
 * must therefore write only through `trx` (and register what happens after the commit with afterCommit); every body
 * here does. SQLite has one writer and cannot deadlock.
 */
export async function writeTransaction<T>(db: Kysely<DB>, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  let hooks: Array<() => void> = [];
  const body = (trx: Transaction<DB>) => {
    // A group commit runs its jobs one after another on one transaction: each job's hooks are its own.
    commitHooks.set(trx, hooks);
    return fn(trx);
  };
  const writer = writers.get(db);
  let value: T;
  if (writer) value = await writer(body);
  else {
    const uow = currentUnitOfWork();
    for (let run = 1; ; run++) {
      try {
        value = await db.transaction().execute(committingWith(uow, body));
        break;
      } catch (err) {
        const reason = RETRYABLE[(err as { code?: unknown }).code as string];
        if (!reason || run >= MAX_RUNS) throw err;
        transactionRetries[reason]++;
        // The hooks of the rolled-back run never run; the next run registers its own.
        hooks = [];
        // Apart, so the two sides of the race do not meet again in the same order.
        await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * run));
      }
    }
  }
  for (const hook of hooks) hook();
  return value;
}
