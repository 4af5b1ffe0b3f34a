import type { Kysely, Transaction } from 'kysely';
import { lockingRead } from '../../db/locks.js';
import type { DB } from '../../db/schema.js';
import { documentsRepository } from '../documents/documents.repository.js';
import { faqsRepository } from '../faqs/faqs.repository.js';

type Conn = Kysely<DB> | Transaction<DB>;

export const assistantRepository = {
  /** `lock`: the read of an update, locked until its transaction ends (locks.ts). */
  async settings(db: Conn, accountId: string, lock = false) {
    const q = db.selectFrom('accounts').select(['assistant_settings']).where('id', '=', accountId);
    const row = await (lock ? lockingRead(db, q) : q).executeTakeFirst();
    return row?.assistant_settings ?? null;
  },
  saveSettings(db: Conn, accountId: string, json: string) {
    return db.updateTable('accounts').set({ assistant_settings: json }).where('id', '=', accountId).execute();
  },
  /**
   * Every document and FAQ with its status (changed since a time, if given). Only active documents and
   * approved FAQs are ever cited; the others are indexed as evidence of unpublished topics.
   */
  async knowledge(db: Conn, accountId: string, changedSince = 0) {
    const [docs, faqs] = await Promise.all([
      documentsRepository.listForIndex(db, accountId, changedSince),
      faqsRepository.listForIndex(db, accountId, changedSince),
    ]);
    return { docs, faqs };
  },
  /** Ids of every document and FAQ that exists now: what is missing from an index must leave it. */
  async ids(db: Conn, accountId: string) {
    const [docs, faqs] = await Promise.all([documentsRepository.ids(db, accountId), faqsRepository.ids(db, accountId)]);
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
