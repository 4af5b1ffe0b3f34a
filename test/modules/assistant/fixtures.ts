import type { KnowledgeDoc, KnowledgeFaq } from '../../../src/modules/assistant/retrieval.js';

/** A small knowledge base unrelated to the eval set (a fictional tea shop). */
export const DOCS: KnowledgeDoc[] = [
  {
    id: 'doc-shipping',
    title: 'Shipping and Delivery',
    content:
      'We ship every order from our warehouse in Leeds within one working day. Standard shipping costs £3.50 and takes 2–4 working days. Tracking details are emailed to you as soon as the label is printed.\n\n' +
      'Express shipping costs £7.95 and arrives the next working day if you order before 1 pm. Express orders placed on a Friday after 1 pm arrive on Monday; we do not deliver at weekends.\n\n' +
      'We currently ship to the United Kingdom and Ireland only. Orders over £40 ship free. We cannot ship to PO boxes or to freight forwarding companies, sorry.',
  },
  {
    id: 'doc-returns',
    title: 'Returns and Refunds',
    content:
      'You can return unopened tea within 30 days of delivery for a full refund. Opened packets cannot be returned unless they are faulty.\n\n' +
      'Refunds are paid back to your original payment method within 5 working days of your return reaching us. ' +
      'If your teapot arrived broken, send us a photo and we will send a replacement free of charge.',
  },
  {
    id: 'doc-subscription',
    title: 'Tea Subscription',
    content:
      'Our monthly subscription sends three new teas every month. You can pause, skip a month or cancel your subscription at any time from your account page. ' +
      'Cancelling stops the next box; boxes already dispatched are still delivered.',
  },
];

export const FAQS: KnowledgeFaq[] = [
  { id: 'faq-brew', question: 'How long should I brew green tea?', answer: 'Brew green tea for 2–3 minutes with water at about 80 °C.', category: 'brewing' },
  { id: 'faq-gift', question: 'Do you sell gift cards?', answer: 'Yes, e-gift cards from £10 to £100, delivered by email. They never expire.', category: 'payments' },
  { id: 'faq-caffeine', question: 'Which teas are caffeine free?', answer: 'All our herbal and rooibos blends are naturally caffeine free.', category: 'products' },
];

/** An unpublished document (a draft): indexed as evidence of an unpublished topic, never cited. */
export const GIFT_WRAP_DRAFT: KnowledgeDoc = {
  id: 'doc-wrap',
  title: 'Gift wrapping (coming soon)',
  content: 'From December we will gift wrap any order in recycled paper with a handwritten card, for £2.50 per parcel.',
  citable: false,
};
