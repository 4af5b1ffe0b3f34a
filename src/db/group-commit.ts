import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import type { DialectName } from './database.js';
import type { DB } from './schema.js';
import { committingWith, currentUnitOfWork, writeTransaction, type Transact } from './unit-of-work.js';

const SAVEPOINT = CompiledQuery.raw('savepoint group_commit_job');
const RELEASE = CompiledQuery.raw('release group_commit_job');
const ROLLBACK_TO = CompiledQuery.raw('rollback to group_commit_job');

interface Job {
  fn: (trx: Transaction<DB>) => Promise<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/**
 * Runs small write transactions, grouping those that arrive together into one SQLite transaction (group
 * commit). SQLite has a single writer and a commit is its dearest step (with synchronous=FULL an fsync: about
 * 1.7 ms on the benchmark machine, against 60 µs without); concurrent API writes would otherwise pay one each.
 * openDatabase makes it the writer of every `writeTransaction` on an SQLite database (unit-of-work.ts). Every job runs alone inside
 * its own SAVEPOINT: a job that throws is rolled back to it and fails by itself, the others go on; a job's
 * promise settles only after the commit that made it durable, so no caller hears of a write that a crash
 * could still lose. Jobs run one after another, as separate transactions on SQLite's one connection would.
 *
 * PostgreSQL has real concurrent transactions, so there each job is simply its own transaction.
 */
export function createGroupCommit(db: Kysely<DB>, dialect: DialectName, opts: { maxBatch?: number } = {}): Transact {
  if (dialect !== 'sqlite') return (fn) => writeTransaction(db, fn);
  const maxBatch = opts.maxBatch ?? 64;
  let pending: Job[] = [];
  let running = false;

  async function flush() {
    running = true;
    while (pending.length) {
      const batch = pending.slice(0, maxBatch);
      pending = pending.slice(batch.length);
      const done: Array<{ job: Job; value: unknown }> = [];
      try {
        const trx = await db.startTransaction().execute();
        try {
          for (const job of batch) {
            await trx.executeQuery(SAVEPOINT);
            try {
              const value = await job.fn(trx);
              await trx.executeQuery(RELEASE);
              done.push({ job, value });
            } catch (err) {
              try {
                await trx.executeQuery(ROLLBACK_TO);
                await trx.executeQuery(RELEASE);
              } catch {
                // The savepoint is gone: SQLite rolled the whole transaction back itself (a full database, no memory),
                // undoing the jobs before this one too. The batch fails with this job's error, the cause, rather than
                // with "no such savepoint", which the jobs and the log would otherwise have been given.
                throw err;
              }
              job.reject(err);
            }
          }
          await trx.commit().execute();
        } catch (err) {
          await trx.rollback().execute().catch(() => undefined);
          throw err;
        }
        for (const { job, value } of done) job.resolve(value);
      } catch (err) {
        // The transaction itself failed (begin, savepoint bookkeeping, commit, or a job's error that rolled it all
        // back): none of its jobs happened, and none has been told otherwise.
        for (const job of batch) job.reject(err); // a no-op for jobs already refused on their own
      }
    }
    running = false;
  }

  return <T>(fn: (trx: Transaction<DB>) => Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      // The batch runs from another request's turn: the caller's unit of work is taken along with its job, and
      // runs inside the job's savepoint, so it is rolled back with a job that fails.
      pending.push({ fn: committingWith(currentUnitOfWork(), fn), resolve: resolve as (v: unknown) => void, reject });
      // Requests arriving in the same turn of the event loop join the batch; one flush runs at a time and
      // takes whatever queued up meanwhile.
      if (!running) {
        running = true;
        setImmediate(() => void flush());
      }
    });
}
