import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/schema.js';
import { documentsRepository } from '../documents/documents.repository.js';
import { faqsRepository } from '../faqs/faqs.repository.js';

type Conn = Kysely<DB> | Transaction<DB>;

export const assistantRepository = {
  async settings(db: Conn, accountId: string) {
    const row = await db.selectFrom('accounts').select(['assistant_settings']).where('id', '=', accountId).executeTakeFirst();
    return row?.assistant_settings ?? null;
  },
  saveSettings(db: Conn, accountId: string, json: string) {
    return db.updateTable('accounts').set({ assistant_settings: json }).where('id', '=', accountId).execute();
  },
  async knowledgeVersion(db: Conn, accountId: string) {
    const row = await db.selectFrom('accounts').select(['knowledge_version']).where('id', '=', accountId).executeTakeFirst();
    return row?.knowledge_version ?? 0;
  },
  /** Only what the assistant may use: active documents and approved FAQs (changed since a time, if given). */
  async knowledge(db: Conn, accountId: string, changedSince = 0) {
    const [docs, faqs] = await Promise.all([
      documentsRepository.listActive(db, accountId, changedSince),
      faqsRepository.listApproved(db, accountId, changedSince),
    ]);
    return { docs, faqs };
  },
  /** Ids of everything the assistant may use now: what is missing from an index must leave it. */
  async usableIds(db: Conn, accountId: string) {
    const [docs, faqs] = await Promise.all([documentsRepository.activeIds(db, accountId), faqsRepository.approvedIds(db, accountId)]);
    return new Set([...docs.map((d) => d.id), ...faqs.map((f) => f.id)]);
  },
  /** Labels of cited sources: FAQ categories and document titles (for tags and topics). */
  async sourceLabels(db: Conn, accountId: string, ids: string[]) {
    if (ids.length === 0) return { faqs: [], docs: [] };
    const [faqs, docs] = await Promise.all([
      db.selectFrom('faqs').select(['id', 'category']).where('account_id', '=', accountId).where('id', 'in', ids).execute(),
      db.selectFrom('documents').select(['id', 'title']).where('account_id', '=', accountId).where('id', 'in', ids).execute(),
    ]);
    return { faqs, docs };
  },
};
