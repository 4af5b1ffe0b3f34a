import { AsyncLocalStorage } from 'node:async_hooks';
import type { Kysely, Transaction } from 'kysely';
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

/** Runs `fn` (and everything it starts) with `uow` attached to its write transactions. */
export function withUnitOfWork<T>(uow: UnitOfWork, fn: () => T): T {
  return current.run(uow, fn);
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

/** A write transaction: `db.transaction()`, with the current unit of work's `beforeCommit` before COMMIT. */
export function writeTransaction<T>(db: Kysely<DB>, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return db.transaction().execute(committingWith(currentUnitOfWork(), fn));
}
