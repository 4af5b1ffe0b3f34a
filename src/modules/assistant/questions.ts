/**
 * What counts as a question the knowledge base could have answered: one rule for the rundowns' unanswered
 * questions and for the conversation's `unanswered` tag and topic keywords, so the two never disagree.
 */
import { detectHandoff, isAffirmative, isDissatisfied, isNegative, smallTalkKind } from './intent.js';
import { EMAIL_IN_TEXT, EMAILS_IN_TEXT, STOPWORDS, words } from './text.js';

/** Lower case, whitespace collapsed, trailing punctuation dropped: "Do you ship to Mars??" = "do you ship to mars". */
export function normaliseQuestion(text: string): string {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/[\s\p{P}]+$/u, '');
}

/** Words that come with an address given as contact details: "my email is …", "reach me at …", "use … instead". */
const CONTACT_WORDS = new Set(['email', 'mail', 'e', 'address', 'contact', 'reach', 'use', 'instead', 'at', 'via', 'on', 'here', 'new', 'correct', 'updated']);

/** A message that gives an email address and nothing else ("jo@acme.test", "my email is jo@acme.test"). */
export function onlyGivesEmail(text: string): boolean {
  if (!EMAIL_IN_TEXT.test(text)) return false;
  return words(text.replace(EMAILS_IN_TEXT, ' ')).every((w) => STOPWORDS.has(w) || CONTACT_WORDS.has(w));
}

/**
 * False for what no article could answer: a request for a person, small talk ("hello", "thanks", "bye"), a plain
 * yes or no (the answers to the offer of a person), "that didn't help" (about the reply, not a question), a message
 * that only gives an email address, a message with an email address sent once the conversation was escalated (the
 * chat takes it as contact details), and a message with nothing left once normalised ("???").
 */
export function isKnowledgeQuestion(content: string, sentAt: number, escalatedAt: number | null): boolean {
  if (detectHandoff(content) || smallTalkKind(content) !== undefined || isAffirmative(content) || isNegative(content) || isDissatisfied(content) || onlyGivesEmail(content)) return false;
  if (escalatedAt !== null && escalatedAt <= sentAt && EMAIL_IN_TEXT.test(content)) return false;
  return normaliseQuestion(content) !== '';
}
