/**
 * Text processing for the knowledge-base assistant: normalisation, tokenising,
 * an English Porter stemmer, stopwords, a general support/e-commerce synonym
 * table (applied symmetrically to documents and queries) and a small
 * distance-1 spelling corrector.
 *
 * Everything here is pure and synchronous.
 */

/** An email address inside free text (the chat takes one as contact details; workflows extract it). */
export const EMAIL_IN_TEXT = /[\w.+-]+@[\w-]+(?:\.[\w-]+)+/;
/** Every email address in a text (global: for replace, never for a stateful test/exec). */
export const EMAILS_IN_TEXT = new RegExp(EMAIL_IN_TEXT.source, 'g');

const US = /\bU\.?S\.?(?![\w.])/g;
/**
 * "US" in capitals is the country ("do you ship to the US?"); lower-cased it would be the pronoun "us", a stopword.
 * Not in a line of capitals ("CONTACT US", "ABOUT US": a heading).
 */
function theCountry(us: string, at: number, text: string): string {
  const before = /([A-Za-z]+)[^A-Za-z]*$/.exec(text.slice(Math.max(0, at - 40), at))?.[1];
  return before !== undefined && before.length > 1 && before === before.toUpperCase() ? us : 'USA';
}

/** Lower-case, strip diacritics, read "US" in capitals as the country, unify quotes/dashes, collapse whitespace. */
export function normalize(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(US, theCountry)
    .toLowerCase()
    .replace(/ß/g, 'ss')
    .replace(/[\u2018\u2019\u02bc`´]/g, "'")
    .replace(/[\u201c\u201d]/g, '"')
    .replace(/[\u2010-\u2015\u2212]/g, '-')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * Split normalised text into raw word tokens. Keeps digits, joins "e-mail"
 * style hyphenations into separate words, drops possessive/contraction tails.
 */
export function words(text: string): string[] {
  const norm = normalize(text)
    .replace(/(\w)'(s|re|ve|ll|d|m|t)\b/g, (_m, a: string, b: string) => (b === 't' ? `${a}t` : a))
    .replace(/(\d)[.,](\d)/g, '$1$2')
    .replace(/\bp\. ?o\.? ?(?=box)/g, 'po ')
    .replace(/\b([a-z])-(?=[a-z]{2})/g, '$1');
  const out: string[] = [];
  for (const m of norm.matchAll(/[\p{L}\p{N}]+/gu)) {
    const w = m[0];
    if (w.length > MAX_WORD_LENGTH) continue;
    if (!UNSPACED.test(w)) {
      out.push(w);
      continue;
    }
    // Chinese and Japanese are written without spaces: a run of their characters is read as its overlapping
    // pairs ("退货政策" → 退货 货政 政策), the usual unit for matching such text without a dictionary; other
    // letters in the run (Latin, digits) stay words of their own.
    for (const part of w.split(UNSPACED_RUNS)) {
      if (!part) continue;
      if (!UNSPACED.test(part)) out.push(part);
      else if (part.length === 1) out.push(part);
      else for (let i = 0; i + 1 < part.length; i++) out.push(part.slice(i, i + 2));
    }
  }
  return out;
}

const UNSPACED_LETTER = String.raw`[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]`;
const UNSPACED = new RegExp(UNSPACED_LETTER, 'u');
/** Splits a run into its unspaced stretches (kept, as the split's capture) and the rest. */
const UNSPACED_RUNS = new RegExp(`(${UNSPACED_LETTER}+)`, 'u');

/**
 * Longer runs are not words (a pasted hash, base64, "xxxx…") and cost quadratic time downstream: the spelling
 * corrector indexes every deletion of every term, so one 500,000-character run stalled a whole process.
 */
const MAX_WORD_LENGTH = 50;

// ---------------------------------------------------------------------------
// Stopwords (English + chat filler). Kept deliberately small: words such as
// "not", "no", "before", "after" are kept out of this list only when they
// matter for support questions (they are rarely decisive, so we do drop them).
// ---------------------------------------------------------------------------
const STOPWORDS_LIST = `a about above after again against all am an and any are aren arent as at be because been
before being below between both but by can cannot could couldn couldnt did didn didnt do does doesn doesnt doing don
dont down during each few for from further had hadn hadnt has hasn hasnt have haven havent having he her here hers
herself him himself his how i if in into is isn isnt it its itself just let lets me more most mustn my myself no nor
not of off on once only or other ought our ours ourselves out over own same shan she should shouldn so some such
than that thats the their theirs them themselves then there theres these they this those through to too under until
up very was wasn wasnt we were weren what whats when where which while who whom why will with won wont would wouldn
you your yours yourself yourselves im ive id ill youre youve hi hello hey hiya thanks thank thx ty please pls plz
pleas ok okay yes yeah yep nope ugh hmm um uh lol u ur ya also really actually just still even anyway anyways
gonna wanna gotta got get getting gets want wanted wants need needs needed like would could might may must shall
oh well much many lot lots thing things stuff something anything everything someone somebody anyone anybody
know think tell said say says one ones way guys guy etc rn asap now today till til ago mine
yesterday tomorrow twice around kind sort couple bit little whole right away fine ever us`;
export const STOPWORDS: ReadonlySet<string> = new Set(STOPWORDS_LIST.split(/\s+/).filter(Boolean));

// ---------------------------------------------------------------------------
// Everyday English words that are not stopwords (they can be what a knowledge
// base talks about, so they are indexed and matched normally) but that say
// nothing about the TOPIC of a question when the knowledge base does not use
// them: "never", "often", "push back", "halfway", "anymore". Retrieval gives
// such words no weight in the confidence measure when they are unknown to the
// index, so a colloquial paraphrase is not mistaken for an off-topic question.
// Generic adverbs, adjectives, verbs and nouns only — no domain vocabulary.
// ---------------------------------------------------------------------------
const EVERYDAY_LIST = `able about absolutely across actual ago ahead almost alone along already alright although always
another answer anymore anyhow anytime anyway anywhere apparently appear approximately area around arrive ask asked
asking attempt attempted available away awful back bad badly basically become began begin beginning behind believe
best better big bigger biggest bit both bother bring broad call called calling came care careful case certain
certainly chance change clear clearly close come comes coming completely consider correct couple course currently
daily day days dear decent decide decided deep definitely despite did different difficult direct directly do done
double each early earlier easily easy either else elsewhere end ended enough entire entirely especially every
everybody everyone everywhere exact exactly example except expect expected explain extra fact fair fairly far fast
feel felt few figure finally find fine finish first follow following forgot forget forgotten former forward
frankly frequently fully further generally genuinely give given glad go goes going gone good great guess half
halfway hand handle happen happened happening happens happy hard hardly heard help helpful here high higher highest
hold honest honestly hope hopefully huge idea immediately important indeed inside instead issue just keep kind
knew large last lately later latest least leave left less let level likely line little long longer look looked
looking looks lose low lower main mainly major make making matter maybe mean means meant meanwhile mention mentioned
mind minor miss mistake moment more moreover mostly move moved moving much nearly necessary nice nobody none
normal normally nothing notice noticed obviously odd often old once only open opposite option ordinary otherwise
outside overall part particular particularly past perhaps pick piece place plain plan plenty point possible
possibly pretty previous previously probably problem proper properly pull push put quick quickly quite rather
reach read ready real realise realize really reason recent recently regular regularly remember rest right round
run same saw second see seem seemed seems sense serious seriously several shall short side similar simple simply
since situation slightly slow small so soon sorry sort specific specifically spend start started state stay stop
straight strange such suddenly suppose supposed sure surely take taking talk tell tend terrible than thing think
though thought through throughout thus together top totally tried tries true truly try trying turn turned twice
type typical typically unable unless unlike unusual upon use used useful usual usually various view wait waiting
want watch week weird went whatever whenever whether while whole why wide wish without wonder wondering word work
worked worry worse worst wrong yet`;

// ---------------------------------------------------------------------------
// Porter stemmer (M.F. Porter, 1980), compact implementation.
// ---------------------------------------------------------------------------
const step2list: Record<string, string> = {
  ational: 'ate', tional: 'tion', enci: 'ence', anci: 'ance', izer: 'ize', bli: 'ble', alli: 'al', entli: 'ent',
  eli: 'e', ousli: 'ous', ization: 'ize', ation: 'ate', ator: 'ate', alism: 'al', iveness: 'ive', fulness: 'ful',
  ousness: 'ous', aliti: 'al', iviti: 'ive', biliti: 'ble', logi: 'log',
};
const step3list: Record<string, string> = {
  icate: 'ic', ative: '', alize: 'al', iciti: 'ic', ical: 'ic', ful: '', ness: '',
};
const C = '[^aeiou]';
const V = '[aeiouy]';
const CC = C + '[^aeiouy]*';
const VV = V + '[aeiou]*';
const mgr0 = new RegExp('^(' + CC + ')?' + VV + CC);
const meq1 = new RegExp('^(' + CC + ')?' + VV + CC + '(' + VV + ')?$');
const mgr1 = new RegExp('^(' + CC + ')?' + VV + CC + VV + CC);
const sV = new RegExp('^(' + CC + ')?' + V);

const stemCache = new Map<string, string>();

export function stem(word: string): string {
  // Porter's rules are for English: words of other scripts are matched as written.
  if (word.length < 3 || /\d/.test(word) || !/^[a-z]+$/.test(word)) return word;
  const cached = stemCache.get(word);
  if (cached !== undefined) return cached;
  let w = word;
  const firstY = w[0] === 'y';
  if (firstY) w = 'Y' + w.slice(1);
  let m: RegExpExecArray | null;

  // Step 1a
  if ((m = /^(.+?)(ss|i)es$/.exec(w))) w = m[1]! + m[2]!;
  else if ((m = /^(.+?)([^s])s$/.exec(w))) w = m[1]! + m[2]!;

  // Step 1b
  if ((m = /^(.+?)eed$/.exec(w))) {
    if (mgr0.test(m[1]!)) w = w.slice(0, -1);
  } else if ((m = /^(.+?)(ed|ing)$/.exec(w))) {
    const s = m[1]!;
    if (sV.test(s)) {
      w = s;
      if (/(at|bl|iz)$/.test(w)) w += 'e';
      else if (/([^aeiouylsz])\1$/.test(w)) w = w.slice(0, -1);
      else if (new RegExp('^' + CC + V + '[^aeiouwxy]$').test(w)) w += 'e';
    }
  }
  // Step 1c
  if ((m = /^(.+?)y$/.exec(w)) && sV.test(m[1]!)) w = m[1]! + 'i';

  // Step 2
  if ((m = /^(.+?)(ational|tional|enci|anci|izer|bli|alli|entli|eli|ousli|ization|ation|ator|alism|iveness|fulness|ousness|aliti|iviti|biliti|logi)$/.exec(w))) {
    if (mgr0.test(m[1]!)) w = m[1]! + step2list[m[2]!]!;
  }
  // Step 3
  if ((m = /^(.+?)(icate|ative|alize|iciti|ical|ful|ness)$/.exec(w))) {
    if (mgr0.test(m[1]!)) w = m[1]! + step3list[m[2]!]!;
  }
  // Step 4
  if ((m = /^(.+?)(al|ance|ence|er|ic|able|ible|ant|ement|ment|ent|ou|ism|ate|iti|ous|ive|ize)$/.exec(w))) {
    if (mgr1.test(m[1]!)) w = m[1]!;
  } else if ((m = /^(.+?)(s|t)(ion)$/.exec(w))) {
    const s = m[1]! + m[2]!;
    if (mgr1.test(s)) w = s;
  }
  // Step 5
  if ((m = /^(.+?)e$/.exec(w))) {
    const s = m[1]!;
    if (mgr1.test(s) || (meq1.test(s) && !new RegExp('^' + CC + V + '[^aeiouwxy]$').test(s))) w = s;
  }
  if (/ll$/.test(w) && mgr1.test(w)) w = w.slice(0, -1);
  if (firstY) w = 'y' + w.slice(1);
  if (stemCache.size < 200_000) stemCache.set(word, w);
  return w;
}

let everyday: ReadonlySet<string> | undefined;
/** True for the stem of an everyday, topic-neutral English word (see EVERYDAY_LIST). */
export function isEverydayStem(term: string): boolean {
  everyday ??= new Set(EVERYDAY_LIST.split(/\s+/).filter(Boolean).map((w) => stem(w)));
  return everyday.has(term);
}

// ---------------------------------------------------------------------------
// Spelling variants (UK/US, common chat abbreviations) applied to raw words
// before stemming.
// ---------------------------------------------------------------------------
const WORD_VARIANTS: Record<string, string> = {
  tyre: 'tire', tyres: 'tires', colour: 'color', colours: 'colors', cheque: 'check', cheques: 'checks',
  cancelled: 'canceled', cancelling: 'canceling', cancell: 'cancel', cancellation: 'cancel', cancelation: 'cancel',
  jewellery: 'jewelry', catalogue: 'catalog', organisation: 'organization', centre: 'center',
  favour: 'favor', licence: 'license', aluminium: 'aluminum', metre: 'meter', metres: 'meters',
  authorisation: 'authorization', authorise: 'authorize', authorised: 'authorized',
  recognise: 'recognize', customise: 'customize', personalise: 'personalize',
  pymt: 'payment', acct: 'account', addr: 'address', info: 'information', pw: 'password', pwd: 'password',
  msg: 'message', qty: 'quantity', bday: 'birthday', xmas: 'christmas', yrs: 'years', yr: 'year',
  mins: 'minutes', min: 'minute', hrs: 'hours', hr: 'hour', wk: 'week', wks: 'weeks',
  tmrw: 'tomorrow', tomorow: 'tomorrow', recieve: 'receive', recieved: 'received', adress: 'address',
  email: 'email', 'e': 'e', amex: 'american express', mastercard: 'mastercard', giftcard: 'gift card',
  giftcards: 'gift cards', ecard: 'gift card', egift: 'gift', signin: 'sign in', login: 'sign in', logon: 'sign in',
  signup: 'sign up', checkout: 'checkout', refunded: 'refund', refunds: 'refund', refunding: 'refund',
  '2fa': 'verification code', mfa: 'verification code', otp: 'verification code',
  faq: 'faq', ppl: 'people', thru: 'through', tho: 'though', pkg: 'package', shipt: 'shipped',
  po: 'po',
  // irregular verb forms the stemmer cannot reach
  went: 'go', gone: 'go', goes: 'go', going: 'go', got: 'get', gotten: 'get', bought: 'buy', buying: 'buy',
  sent: 'send', paid: 'pay', made: 'make', came: 'come', took: 'take', taken: 'take', gave: 'give', given: 'give',
  brought: 'bring', sold: 'sell', broke: 'broken', wore: 'wear', worn: 'wear', ran: 'run',
  told: 'tell', kept: 'keep', chose: 'choose', chosen: 'choose', fell: 'fall',
  fallen: 'fall', spent: 'spend', sat: 'sit', saw: 'see', seen: 'see', knew: 'know', known: 'know',
  thought: 'think', found: 'find', held: 'hold', won: 'win', wrote: 'write', written: 'write', hung: 'hang',
  children: 'child', men: 'man', women: 'woman', feet: 'foot', teeth: 'tooth', people: 'person',
};

// ---------------------------------------------------------------------------
// Synonym / equivalence table. Each group is a list of words or phrases; the
// FIRST entry is the canonical form. Both indexed text and queries are
// rewritten to the canonical form, so the match is symmetric. This is general
// customer-support / e-commerce vocabulary.
// ---------------------------------------------------------------------------
export const SYNONYM_GROUPS: readonly (readonly string[])[] = [
  ['refund', 'money back', 'reimburse', 'reimbursement', 'repay', 'repayment', 'payback'],
  ['return', 'send back', 'sending back', 'sent back', 'send it back', 'bring back', 'take back', 'give back', 'go back', 'come back', 'ship back'],
  ['package', 'parcel', 'packet', 'shipment', 'consignment'],
  ['ship', 'delivery', 'deliver', 'shipping', 'postage', 'post', 'dispatch', 'mail out', 'send out'],
  ['cancel', 'call off', 'revoke', 'abort'],
  ['damage', 'broken', 'smashed', 'cracked', 'crushed', 'dented', 'damaged in transit'],
  ['faulty', 'defective', 'defect', 'doesnt work', 'does not work', 'not working', 'stopped working', 'malfunction', 'malfunctioning', 'broke'],
  ['warranty', 'guarantee', 'guaranty'],
  ['charge', 'charged', 'billed', 'bill', 'debit', 'debited', 'take payment'],
  ['cost', 'price', 'fee', 'how much', 'pricing'],
  ['customs', 'import duty', 'import duties', 'import tax', 'duty', 'duties', 'tariff', 'tariffs'],
  ['tax', 'sales tax', 'vat', 'gst', 'hst'],
  ['receipt', 'proof of purchase'],
  ['invoice', 'bill of sale'],
  ['promo code', 'coupon', 'coupon code', 'discount code', 'voucher code', 'promotional code', 'promo'],
  ['gift card', 'gift certificate', 'gift voucher', 'voucher', 'e-gift card', 'egift card'],
  ['account', 'profile', 'customer account'],
  ['sign in', 'log in', 'logging in', 'signing in', 'sign on', 'log on'],
  ['sign up', 'register', 'registration', 'create an account', 'open an account', 'make an account'],
  ['password', 'passcode', 'passphrase'],
  ['verification code', 'two factor', 'two-factor', 'authentication code', 'security code', 'authenticator', '2 factor', '2-step', 'two step'],
  ['address', 'street address', 'postal address', 'mailing address'],
  ['zip', 'zip code', 'postcode', 'postal code'],
  ['track', 'tracking', 'trace', 'where is my order', 'wheres my order', 'order status'],
  ['exchange', 'swap', 'swapping', 'replace with', 'trade for'],
  ['size', 'sizing', 'fit', 'fits'],
  ['discount', 'deal', 'reduction', 'money off', 'percent off', 'savings'],
  ['stock', 'inventory', 'availability', 'available'],
  ['sold out', 'out of stock', 'unavailable', 'not in stock'],
  ['backorder', 'back order', 'backordered', 'back ordered'],
  ['pre-order', 'preorder', 'pre order'],
  ['pick up', 'collect', 'collection', 'pickup', 'click and collect'],
  ['email', 'e-mail', 'mail address'],
  ['phone', 'mobile', 'cell', 'cellphone', 'telephone', 'smartphone'],
  ['card', 'credit card', 'debit card', 'bank card'],
  ['paypal', 'pay pal'],
  ['american express', 'amex'],
  ['expire', 'expiry', 'expiration', 'expiry date', 'run out', 'lapse', 'lapsed', 'valid until'],
  ['points', 'reward points', 'loyalty points', 'rewards', 'loyalty'],
  ['store credit', 'shop credit', 'account credit', 'credit note'],
  ['wrong item', 'wrong product', 'wrong thing', 'incorrect item', 'not what i ordered', 'wrong order'],
  ['missing', 'lost', 'never arrived', 'never came', 'didnt arrive', 'did not arrive', 'not arrived', 'hasnt arrived', 'stolen'],
  ['late', 'delayed', 'overdue', 'running late'],
  ['international', 'overseas', 'abroad', 'foreign country', 'outside the us'],
  ['business day', 'working day', 'weekday'],
  ['sale', 'clearance', 'markdown', 'reduced'],
  ['free', 'no charge', 'free of charge', 'at no cost', 'complimentary'],
  ['quick', 'fast', 'express', 'expedited', 'rush', 'quickly', 'faster'],
  ['overnight', 'next day', 'next-day'],
  ['confirmation', 'confirmation email', 'order confirmation'],
  ['decline', 'declined', 'rejected', 'refused', 'card declined', 'wont go through', 'not going through'],
  ['delete', 'erase', 'remove my data', 'close my account', 'deactivate'],
  ['data', 'personal data', 'personal information', 'my details'],
  ['installment', 'instalment', 'installments', 'instalments', 'pay later', 'buy now pay later', 'payment plan'],
  ['bulk', 'wholesale', 'large order', 'quantity discount'],
];

const canonicalCache = new Map<string, string>();
/** Stopwords travel through phrase matching with this prefix and are removed afterwards. */
const STOP_MARK = '~';

/** Stem every word of a raw word list after applying spelling variants; drop stopwords if asked. */
function stemWords(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (const w of raw) {
    // own keys only: a customer's "constructor" must not find Object.prototype's
    const v = Object.hasOwn(WORD_VARIANTS, w) ? WORD_VARIANTS[w] : undefined;
    for (const p of v !== undefined ? v.split(' ') : [w]) out.push(STOPWORDS.has(p) ? STOP_MARK + p : stem(p));
  }
  return out;
}

interface PhraseNode {
  next: Map<string, PhraseNode>;
  replacement?: string[];
}

function buildPhraseTrie(): { trie: PhraseNode; singles: Map<string, string[]> } {
  const trie: PhraseNode = { next: new Map() };
  const singles = new Map<string, string[]>();
  for (const group of SYNONYM_GROUPS) {
    const canonical = stemWords(words(group[0]!));
    for (const variant of group) {
      const full = stemWords(words(variant));
      const stripped = full.filter((t) => !isStop(t));
      const seqs = stripped.length >= 2 && stripped.length < full.length ? [full, stripped] : [full];
      for (const seq of seqs) addPhrase(seq, canonical);
    }
  }
  function addPhrase(seq: string[], canonical: string[]): void {
    {
      if (seq.length === 1) {
        if (!singles.has(seq[0]!)) singles.set(seq[0]!, canonical);
        return;
      }
      let node = trie;
      for (const t of seq) {
        let n = node.next.get(t);
        if (!n) {
          n = { next: new Map() };
          node.next.set(t, n);
        }
        node = n;
      }
      if (!node.replacement) node.replacement = canonical;
    }
  }
  return { trie, singles };
}

function isStop(t: string): boolean {
  return t.charCodeAt(0) === 126; // '~'
}

const PHRASES = buildPhraseTrie();

/** Replace multi-word phrases and single-word synonyms with their canonical stems. */
function canonicalise(stems: readonly string[]): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < stems.length) {
    let node: PhraseNode | undefined = PHRASES.trie;
    let bestLen = 0;
    let bestRep: string[] | undefined;
    for (let j = i; j < stems.length && node; j++) {
      node = node.next.get(stems[j]!);
      if (node?.replacement) {
        bestLen = j - i + 1;
        bestRep = node.replacement;
      }
    }
    if (bestRep && bestLen > 1) {
      out.push(...bestRep);
      i += bestLen;
      continue;
    }
    const t = stems[i]!;
    const single = PHRASES.singles.get(t);
    if (single) out.push(...single);
    else out.push(t);
    i++;
  }
  return out;
}

/**
 * Full analysis pipeline used for BOTH indexing and querying:
 * normalise → words → spelling variants → stem → synonym canonicalisation → drop stopwords.
 */
export function analyze(text: string): string[] {
  const stems = stemWords(words(text));
  // Pass 1 matches phrases containing stopwords ("out of stock"), pass 2 the
  // same phrases with filler words removed ("money is back" → "money back").
  const pass1 = canonicalise(stems).filter((t) => t.length > 0 && !isStop(t));
  return canonicalise(pass1).filter((t) => !isStop(t));
}


/** Tokens as used for analysis, cached for short strings (queries repeat a lot). */
export function analyzeCached(text: string): string[] {
  if (text.length > 200) return analyze(text);
  const hit = canonicalCache.get(text);
  if (hit !== undefined) return hit.length ? hit.split(' ') : [];
  const res = analyze(text);
  if (canonicalCache.size < 50_000) canonicalCache.set(text, res.join(' '));
  return res;
}

// ---------------------------------------------------------------------------
// Typo tolerance: a deletion-neighbourhood (SymSpell-style) corrector with
// edit distance 1 over the index vocabulary. Only used for terms that are not
// in the vocabulary at all.
// ---------------------------------------------------------------------------
const MIN_CORRECTABLE = 6;

export class SpellCorrector {
  private readonly deletes = new Map<string, string[]>();
  constructor(private readonly vocab: ReadonlyMap<string, number>) {
    for (const term of vocab.keys()) {
      if (term.length < 4 || /\d/.test(term)) continue;
      this.add(term, term);
      for (let i = 0; i < term.length; i++) this.add(term.slice(0, i) + term.slice(i + 1), term);
    }
  }

  private add(key: string, term: string): void {
    const list = this.deletes.get(key);
    if (list) {
      if (list.length < 8 && !list.includes(term)) list.push(term);
    } else this.deletes.set(key, [term]);
  }

  /** Best known term within edit distance 1 (incl. adjacent transposition), or undefined. */
  correct(term: string): string | undefined {
    if (this.vocab.has(term)) return term;
    // short stems have too many distance-1 neighbours ("rent" → "sent") to correct safely
    if (term.length < MIN_CORRECTABLE || /\d/.test(term)) return undefined;
    const candidates = new Set<string>();
    const direct = this.deletes.get(term); // term is a deletion of a vocab term (vocab has one extra char)
    if (direct) for (const c of direct) candidates.add(c);
    for (let i = 0; i < term.length; i++) {
      const d = term.slice(0, i) + term.slice(i + 1);
      if (this.vocab.has(d)) candidates.add(d); // query has one extra char
      const l = this.deletes.get(d); // substitution / transposition
      if (l) for (const c of l) candidates.add(c);
    }
    let best: string | undefined;
    let bestDf = -1;
    for (const c of candidates) {
      if (!oneTypoApart(c, term)) continue;
      const df = this.vocab.get(c) ?? 0;
      if (df > bestDf) {
        best = c;
        bestDf = df;
      }
    }
    return best;
  }
}

/**
 * One typo apart: one letter inserted, dropped or changed, or two neighbours swapped ("adress" ~ "address",
 * "delte", "deleet"). The spelling corrector's test, and the workflows' on trigger words. Linear in the words'
 * length, with no table: the workflows run it against every word of a message.
 */
export function oneTypoApart(a: string, b: string): boolean {
  if (a === b) return false;
  const [s, l] = a.length <= b.length ? [a, b] : [b, a];
  if (l.length - s.length > 1) return false;
  let i = 0;
  while (i < s.length && s[i] === l[i]) i++;
  if (s.length === l.length) {
    if (s.slice(i + 1) === l.slice(i + 1)) return true; // changed
    return s[i] === l[i + 1] && s[i + 1] === l[i] && s.slice(i + 2) === l.slice(i + 2); // swapped
  }
  return s.slice(i) === l.slice(i + 1); // inserted or dropped
}

/**
 * Text without HTML markup: script and style elements with their content, comments, tags and character
 * references. A widget may pass markup through ("How long do refunds take? <img src=x onerror=…>"); its words
 * ("img", "onerror") are not the customer's, and counted as unknown topical words they made the assistant abstain.
 */
export function stripMarkup(text: string): string {
  return text
    .replace(/<(script|style)\b[^>]*>[\s\S]*?(?:<\/\1\s*>|$)/gi, ' ')
    .replace(/<!--[\s\S]*?(?:-->|$)/g, ' ')
    .replace(/<\/?[a-z][^<>]*>/gi, ' ')
    .replace(/&(?:#\d+|#x[0-9a-f]+|[a-z]+);/gi, ' ');
}
