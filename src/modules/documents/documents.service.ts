import type { Kysely } from 'kysely';
import type { DB, DocumentsTable } from '../../db/schema.js';
import { writeTransaction } from '../../db/unit-of-work.js';
import { notFound, rejectBlank } from '../../http/errors.js';
import { nextUpdateTime, toIso, type Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { accountsRepository } from '../accounts/accounts.repository.js';
import { documentsRepository as repo, type DocumentRow } from './documents.repository.js';
import type { CreateDocumentBody, ListDocumentsQuery, UpdateDocumentBody } from './documents.schemas.js';

const toRecord = (r: DocumentRow) => ({
  id: r.id,
  title: r.title,
  content: r.content,
  status: r.status,
  createdAt: toIso(r.created_at),
  updatedAt: toIso(r.updated_at),
});

export function createDocumentsService(db: Kysely<DB>, clock: Clock) {
  return {
    /**
     * Grows with every committed change to the account's documents (and FAQs): what the routes' kept answers are
     * versioned by (http/versioned-answers.ts), read before the documents they show.
     */
    knowledgeVersion(accountId: string) {
      return accountsRepository.knowledgeVersion(db, accountId);
    },

    async list(accountId: string, q: ListDocumentsQuery) {
      const f = { status: q.status ?? 'all', limit: q.limit, offset: q.offset };
      const { rows, total } = await repo.list(db, accountId, f);
      return {
        documents: rows.map((r) => ({ id: r[0], title: r[1], status: r[2], createdAt: toIso(r[3]), updatedAt: toIso(r[4]) })),
        total,
        limit: f.limit,
        offset: f.offset,
      };
    },

    async get(accountId: string, id: string) {
      const row = await repo.find(db, accountId, id);
      if (!row) throw notFound('document', id);
      return toRecord(row);
    },

    /** Also used by `parley demo` to load its samples inside its own transaction. */
    async create(accountId: string, body: CreateDocumentBody, trx?: Kysely<DB>) {
      rejectBlank('body.title', body.title);
      rejectBlank('body.content', body.content);
      const now = clock.now();
      const row: DocumentsTable = {
        id: newId('doc', now),
        account_id: accountId,
        title: body.title,
        content: body.content,
        status: body.status ?? 'active',
        created_at: now,
        updated_at: now,
      };
      const write = async (conn: Kysely<DB>) => {
        await repo.insert(conn, row);
        await accountsRepository.bumpKnowledgeVersion(conn, accountId);
      };
      if (trx) await write(trx);
      else await writeTransaction(db, write);
      return { id: row.id, title: row.title, status: row.status, createdAt: toIso(now) };
    },

    async update(accountId: string, id: string, body: UpdateDocumentBody) {
      rejectBlank('body.title', body.title);
      rejectBlank('body.content', body.content);
      const row = await writeTransaction(db, async (trx) => {
        const current = await repo.find(trx, accountId, id, true);
        if (!current) throw notFound('document', id);
        const patch = { ...body, updated_at: nextUpdateTime(clock, current.updated_at) };
        await repo.update(trx, accountId, id, patch);
        await accountsRepository.bumpKnowledgeVersion(trx, accountId);
        return { ...current, ...patch };
      });
      return toRecord(row);
    },

    async delete(accountId: string, id: string) {
      const deleted = await writeTransaction(db, async (trx) => {
        const ok = await repo.delete(trx, accountId, id);
        if (ok) await accountsRepository.bumpKnowledgeVersion(trx, accountId);
        return ok;
      });
      if (!deleted) throw notFound('document', id);
      return { deleted: true };
    },
  };
}

export type DocumentsService = ReturnType<typeof createDocumentsService>;
