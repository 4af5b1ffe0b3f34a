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
  /** Only what the assistant may use: active documents and approved FAQs. */
  async knowledge(db: Conn, accountId: string) {
    const [docs, faqs] = await Promise.all([documentsRepository.listActive(db, accountId), faqsRepository.listApproved(db, accountId)]);
    return { docs, faqs };
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
