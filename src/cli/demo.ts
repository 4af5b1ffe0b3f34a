import type { AppContext } from '../context.js';
import { lockForCheckThenWrite } from '../db/locks.js';
import { AccountsError, refuseIfBeingDeleted } from '../modules/accounts/accounts.service.js';

// A small sample shop, enough to hold a conversation with `parley demo` right after installing.
const DOCUMENTS = [
  {
    title: 'Shipping options and delivery times',
    content:
      'Orders placed before 2 pm ship the same business day. Standard shipping costs $6.95 and takes 3 to 6 business days; it is free on orders of $75 or more. Expedited shipping costs $14.95 and takes 2 business days. Overnight shipping costs $34.95.\n\nWe ship to PO boxes with standard shipping only.',
  },
  {
    title: 'Returns and refunds',
    content:
      'You can return unused items within 30 days of delivery for a full refund. Start a return from your order page or from the returns portal with your order number and email. Refunds go back to the original payment method within 5 to 10 business days after the return arrives.\n\nReturn shipping is free for exchanges; otherwise $6.95 is deducted from the refund.',
  },
  {
    title: 'Warranty',
    content:
      'Frames carry a lifetime warranty against manufacturing defects for the original owner. Components are covered for two years. Crash damage and normal wear are not covered. To make a claim, email photos of the defect and your order number.',
  },
  {
    title: 'Order changes and cancellations',
    content:
      'You can change or cancel an order within one hour of placing it from your account page. After that the order is being packed; contact us and we will try, but once it has shipped you will need to return it instead.',
  },
  {
    title: 'Contact us and opening hours',
    content:
      'Our team answers chat, email and phone from 9 am to 6 pm Eastern time, Monday to Friday, and from 10 am to 4 pm on Saturdays. We are closed on Sundays and public holidays. Email support@example.com or call 1-800-555-0199.\n\nOur bike store and workshop are at 120 Harbor Street, Portland, Maine (our address for letters too) and keep the same opening hours.',
  },
];

const FAQS = [
  { question: 'How do I track my order?', answer: 'Use the tracking link in your shipping confirmation email, or open the order in your account.', category: 'shipping' },
  { question: 'Do you ship internationally?', answer: 'We ship to Canada, the UK and the EU. Duties are calculated at checkout.', category: 'shipping' },
  { question: 'How long do refunds take?', answer: 'Refunds reach your original payment method 5 to 10 business days after we receive the return.', category: 'returns' },
  { question: 'Which payment methods do you accept?', answer: 'Visa, Mastercard, American Express, PayPal and Apple Pay.', category: 'payments' },
  { question: 'How do I reset my password?', answer: 'Click "Forgot password" on the sign-in page and follow the link we email you.', category: 'account' },
  { question: 'What size frame do I need?', answer: 'Measure your inseam and use the size chart on each product page; between sizes, pick the smaller frame.', category: 'sizing' },
];

/**
 * Loads the sample documents and FAQs into an account, skipping each one the account already has (a document
 * with the same title, an FAQ with the same question, in any status), so running it again adds nothing.
 * The check and the inserts share one transaction under a lock, so two runs started together load the samples
 * once: the second waits, then finds them. Answers how many it loaded and how many it skipped.
 */
export async function runDemo(ctx: AppContext, accountId: string) {
  return ctx.db.transaction().execute(async (trx) => {
    await lockForCheckThenWrite(trx, ctx.database.dialect, `parley demo ${accountId}`);
    const account = await trx.selectFrom('accounts').select(['id', 'deletion_started_at']).where('id', '=', accountId).executeTakeFirst();
    if (!account) throw new AccountsError(`account ${accountId} not found`);
    refuseIfBeingDeleted(account);
    const [docRows, faqRows] = await Promise.all([
      trx.selectFrom('documents').select('title').where('account_id', '=', accountId).where('title', 'in', DOCUMENTS.map((d) => d.title)).execute(),
      trx.selectFrom('faqs').select('question').where('account_id', '=', accountId).where('question', 'in', FAQS.map((f) => f.question)).execute(),
    ]);
    const haveTitles = new Set(docRows.map((r) => r.title));
    const haveQuestions = new Set(faqRows.map((r) => r.question));
    const docs = DOCUMENTS.filter((d) => !haveTitles.has(d.title));
    const faqs = FAQS.filter((f) => !haveQuestions.has(f.question));
    // The services' own rules, with their writes in this transaction.
    for (const d of docs) await ctx.services.documents.create(accountId, { ...d, status: 'active' }, trx);
    for (const f of faqs) await ctx.services.faqs.create(accountId, { ...f, status: 'approved' }, trx);
    return {
      accountId,
      documents: docs.length,
      faqs: faqs.length,
      skipped: { documents: DOCUMENTS.length - docs.length, faqs: FAQS.length - faqs.length },
    };
  });
}
