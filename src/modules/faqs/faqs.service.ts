import type { Kysely } from 'kysely';
import type { DB, FaqsTable } from '../../db/schema.js';
import { writeTransaction } from '../../db/unit-of-work.js';
import { notFound, rejectBlank } from '../../http/errors.js';
import { nextUpdateTime, toIso, type Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { accountsRepository } from '../accounts/accounts.repository.js';
import { faqsRepository as repo } from './faqs.repository.js';
import type { CreateFaqBody, ListFaqsQuery, UpdateFaqBody } from './faqs.schemas.js';

export const toFaqRecord = (r: FaqsTable) => ({
  id: r.id,
  question: r.question,
  answer: r.answer,
  category: r.category,
  status: r.status,
  createdAt: toIso(r.created_at),
  updatedAt: toIso(r.updated_at),
});

function rejectBlanks(body: { question?: string | undefined; answer?: string | undefined }) {
  rejectBlank('body.question', body.question);
  rejectBlank('body.answer', body.answer);
}

export function createFaqsService(db: Kysely<DB>, clock: Clock) {
  return {
    /** Raised by every FAQ write in its own transaction (and by every document write): what kept reads check. */
    knowledgeVersion(accountId: string) {
      return accountsRepository.knowledgeVersion(db, accountId);
    },

    async list(accountId: string, q: ListFaqsQuery) {
      const f = { status: q.status ?? 'all', category: q.category, limit: q.limit, offset: q.offset };
      const { rows, total } = await repo.list(db, accountId, f);
      return { faqs: rows.map(toFaqRecord), total, limit: f.limit, offset: f.offset };
    },

    async get(accountId: string, id: string) {
      const row = await repo.find(db, accountId, id);
      if (!row) throw notFound('faq', id);
      return toFaqRecord(row);
    },

    /** Also used by rundowns to file suggested FAQs as pending, inside their own transaction. */
    async create(accountId: string, body: CreateFaqBody, trx?: Kysely<DB>) {
      rejectBlanks(body);
      const now = clock.now();
      const row: FaqsTable = {
        id: newId('faq', now),
        account_id: accountId,
        question: body.question,
        answer: body.answer,
        category: body.category,
        status: body.status ?? 'approved',
        created_at: now,
        updated_at: now,
      };
      const write = async (conn: Kysely<DB>) => {
        await repo.insert(conn, row);
        await accountsRepository.bumpKnowledgeVersion(conn, accountId);
      };
      if (trx) await write(trx);
      else await writeTransaction(db, write);
      return toFaqRecord(row);
    },

    /** `trx`: inside the caller's transaction (an erasure rewording a suggested FAQ, src/modules/rundowns). */
    async update(accountId: string, id: string, body: UpdateFaqBody, trx?: Kysely<DB>) {
      rejectBlanks(body);
      const write = async (conn: Kysely<DB>) => {
        const current = await repo.find(conn, accountId, id, true);
        if (!current) throw notFound('faq', id);
        const patch = { ...body, updated_at: nextUpdateTime(clock, current.updated_at) };
        await repo.update(conn, accountId, id, patch);
        await accountsRepository.bumpKnowledgeVersion(conn, accountId);
        return { ...current, ...patch };
      };
      const row = trx ? await write(trx) : await writeTransaction(db, write);
      return toFaqRecord(row);
    },

    /** `trx`: inside the caller's transaction (an erasure withdrawing a suggested FAQ, src/modules/rundowns). */
    async delete(accountId: string, id: string, trx?: Kysely<DB>) {
      const write = async (conn: Kysely<DB>) => {
        const ok = await repo.delete(conn, accountId, id);
        if (ok) await accountsRepository.bumpKnowledgeVersion(conn, accountId);
        return ok;
      };
      const deleted = trx ? await write(trx) : await writeTransaction(db, write);
      if (!deleted) throw notFound('faq', id);
      return { deleted: true };
    },
  };
}

export type FaqsService = ReturnType<typeof createFaqsService>;
