/**
 * Intent detection for customer messages: explicit requests for a human
 * (multilingual) and greetings / small talk.
 */
import { analyze, EMAILS_IN_TEXT, normalize } from './text.js';

/** Nouns that denote a human agent, per language (already normalised: lower case, no accents). */
const AGENT_EN = String.raw`(?:human(?: being)?|person|people|agent|rep|representative|operator|somebody|someone|anyone|anybody|staff(?: member)?|team member|team|employee|supervisor|manager|advisor|adviser|assistant|customer (?:service|support|care)(?: team| agent| rep(?:resentative)?)?|support (?:team|agent|staff|rep)|(?:the |your )?(?:support|service|help ?desk|call cent(?:er|re)))`;
const REAL = String.raw`(?:real|live|actual|proper|human|flesh and blood)`;

const PATTERNS: RegExp[] = [
  // "talk to a person", "speak with someone real", "chat with an actual human", "put me through to an agent"
  new RegExp(String.raw`\b(?:talk|speak|chat|converse)(?:ing)? (?:to|with) (?:a |an |the |some |your |one of your |someone from |somebody from |a member of )?(?:(?:real|live|actual|proper) )?(?:${AGENT_EN})\b(?! (?:size|sizes|height|weight|measurements?)\b)`),
  new RegExp(String.raw`\b(?:connect|transfer|put|pass|forward|escalate|hand|route|switch)(?:ing)? (?:me |this |my (?:chat|case|conversation) )?(?:through |over |on )?(?:to|with) (?:a |an |the |your |some |one of your )?(?:(?:real|live|actual|proper) )?(?:${AGENT_EN})\b`),
  // "get me a person", "give me a human", "I want/need a human", "I'd like a real person"
  new RegExp(String.raw`\b(?:get|give|find|bring|fetch) me (?:a |an |the |your |some )?(?:(?:real|live|actual|proper) )?(?:human|person|agent|rep|representative|operator|supervisor|manager|somebody|someone|staff)\b`),
  new RegExp(String.raw`\b(?:want|need|like|prefer|request|demand)(?:s|ed)? (?:to have |to get )?(?:a|an|the|your|some) (?:(?:real|live|actual|proper) )?(?:human(?! hair)|person to (?:talk|speak|chat)|agent|representative|operator|supervisor|manager)\b`),
  // "real person", "live agent", "actual human", "human being", "someone real"
  new RegExp(String.raw`\b${REAL} (?:person|human|agent|rep|representative|operator|people|somebody|someone)\b`),
  /\b(?:human being|(?:someone|somebody) real|not (?:a|this) (?:bot|robot|machine|chatbot))\b/,
  /\b(?:is there|are there|can i get|could i get|may i have) (?:a|an|any)? ?(?:real |live |actual )?(?:person|human|agent|representative|operator|someone|somebody|anyone|anybody)s? (?:(?:i|we) can|to) (?:talk|speak|chat)/,
  // "can someone from billing look at it", "could somebody from your team look into this" (not "can someone else use my
  // account", "can someone pick up my order"): only a member of the team can look at a customer's case
  /\b(?:can|could|would|will) (?:someone|somebody|anyone|anybody)(?: (?:from|in|on) (?:your |the |a )?\w+(?: (?:team|department|dept))?)? (?:please )?(?:look (?:at|into)|take a look|review|check (?:my|our|this|it|the)|call me|contact me|get back to me|sort (?:this|it) out)\b/,
  // "can a human please look at my account", "could a real person help me" (not "can a person check in for me")
  /\b(?:can|could|would|will) (?:a |an |some |one of your )?(?:(?:real|live|actual) )?(?:human|person|agent|representative|operator|staff member|team member)s? (?:please )?(?:look (?:at|into)|take a look|help me|review|call me|contact me|get back to me)\b/,
  // A call back is something only a person can do: "can someone from your team call me back", "get a member of staff to call me"
  new RegExp(String.raw`\b(?:someone|somebody|anyone|a person|a human|an agent|a (?:member of (?:staff|(?:the |your )?team)|staff member|team member)|(?:one of )?your (?:staff|team|agents))(?: from (?:your|the) (?:team|support|office|company))? (?:to )?(?:please )?(?:call|ring|phone) me(?: back)?\b`),
  // "please escalate this", "can you escalate my case"
  /\bescalate (?:this|it|me|my (?:case|issue|complaint|ticket|problem|request|query))\b/,
  /\b(?:can|could|would|will|please|pls) (?:you )?(?:please )?escalate\b/,
  // "can I get a callback", "I'd like a call back please", "get a person on the line"
  /\b(?:get|have|request|want|like|need|arrange|book|schedule|give me|ask for) (?:a |an )?call ?back\b/,
  /\bget (?:a |an )?(?:person|human|agent|someone|somebody|rep) on the (?:line|phone)\b/,
  // "can you get someone to email me", "have a member of staff contact me"
  /\b(?:get|have|ask) (?:someone|somebody|a person|a human|an agent|a rep|a member of (?:staff|(?:the |your )?team)) (?:from (?:your|the) (?:team|support) )?(?:to )?(?:email|e-mail|contact|reach|write to|message|text) me\b/,
  // "need human help", "file a complaint with a person"
  /\b(?:need|want|get|like|prefer)(?:s|ed)? (?:some |a )?human (?:help|support|assistance|contact|agent)\b/,
  /\bcomplain\w* with a (?:real |live |actual )?(?:person|human)\b/,
  // Spanish
  /\b(?:hablar|charlar|comunicarme|contactar) (?:con|a) (?:una? |el |la |algun |alguna )?(?:persona|humano|agente|asesor|asesora|operador|operadora|representante|alguien|empleado|supervisor|encargado)\b/,
  /\b(?:persona real|agente humano|atencion humana|un humano)\b/,
  // Portuguese
  /\b(?:falar|conversar) com (?:uma? |o |a |algum |alguem)?(?:pessoa|humano|atendente|agente|operador|representante|alguem|consultor|assistente humano|funcionario)\b/,
  /\b(?:pessoa real|atendimento humano|um humano|assistente humano)\b/,
  // Polish ("ł" has no decomposition, so both spellings)
  /\b(?:porozmawiac|rozmawiac|pogadac|polaczyc|skontaktowac sie) z (?:\S+ )?(?:konsultantem|konsultantka|czlowiekiem|człowiekiem|pracownikiem|osoba|agentem|doradca|kims)\b/,
  /\b(?:prawdziwym czlowiekiem|prawdziwym człowiekiem|zywym czlowiekiem|żywym człowiekiem|prawdziwa osoba)\b/,
  // French
  /\b(?:parler|discuter|etre mis en relation) (?:a|avec) (?:un |une |quelqu'?un|le |la |un vrai |une vraie )?(?:conseiller|conseillere|agent|humain|personne|operateur|operatrice|representant|quelqu'?un|employe|responsable)\b/,
  /\b(?:vraie personne|etre humain|un humain|conseiller humain|agent humain)\b/,
  // German
  /\b(?:mit|an) (?:einem|einer|einen|dem|der|ihrem|ihrer) (?:echten |richtigen |menschlichen )?(?:menschen|mitarbeiter|mitarbeiterin|berater|beraterin|person|agenten|kundenberater|kundenservice|support|vorgesetzten|verantwortlichen)\b.*\b(?:sprechen|reden|verbinden|chatten|weiterleiten)\b/,
  /\bmit jemandem (?:vom|aus dem|von ihrem) \w+ (?:sprechen|reden)\b/,
  /\b(?:echten menschen|echte person|menschlichen mitarbeiter|einen menschen)\b/,
  // Italian
  /\b(?:parlare|chattare) con (?:una |un |un' |qualcuno|l'|il |la )?(?:persona|operatore|operatrice|umano|agente|consulente|addetto|rappresentante|qualcuno)\b/,
  /\b(?:persona reale|persona vera|operatore umano|un umano)\b/,
  // Dutch
  /\b(?:spreken|praten|chatten|bellen) met (?:een |iemand|de |een echte |een echt )?(?:mens|medewerker|medewerkster|persoon|agent|iemand|echt persoon|echte persoon)\b/,
  /\bmet (?:een |iemand)?(?:mens|medewerker|persoon|iemand)\w* (?:spreken|praten)\b/,
  /\b(?:echte persoon|echt persoon|echte mens)\b/,
  /\b(?:een|de|uw) (?:medewerker|medewerkster|mens|persoon|klantenservicemedewerker) (?:te )?(?:spreken|bellen)\b/,
  // Swedish, Danish / Norwegian, Finnish
  /\b(?:prata|tala|snacka) med (?:en |nagon |en riktig |en levande )?(?:manniska|person|handlaggare|kundtjanst|agent|operator|medarbetare|radgivare)\b/,
  /\b(?:tale|snakke|prate) med (?:et |en |nogen |noen |et rigtigt |et ekte |en rigtig |en ekte )?(?:menneske|person|medarbejder|medarbeider|kundeservice|kundeservicen|agent|konsulent|radgiver|operator)\b/,
  /\b(?:puhua|puhumaan|jutella) (?:oikean )?(?:ihmisen|asiakaspalvelijan|henkilon|virkailijan|asiakaspalvelun) kanssa\b/,
  // Turkish, Romanian, Czech / Slovak, Hungarian
  /\b(?:temsilci(?:si)?(?:yle|ye|nizle)?|insan(?:la|a)|yetkili(?:yle|ye)?|musteri hizmetleri(?:yle|ne)?|canli destek(?:le|e)?) (?:gorusmek|konusmak|baglanmak|baglan|gorusebilir|konusabilir)/,
  /\b(?:vorbesc|vorbi|discut|discuta|vorbim) cu (?:un |o )?(?:operator|om|persoana|agent|consultant|reprezentant|angajat|om real)\b/,
  /\b(?:mluvit|hovorit|mluvim|hovorim|spojit|spojte me) s (?:\S+ )?(?:operatorem|operatorkou|clovekem|pracovnikem|konzultantem|zivym clovekem|osobou)\b/,
  /\b(?:ugyintezovel|emberrel|operatorral|munkatarssal|kollegaval) (?:szeretnek |akarok |tudnek )?beszelni\b/,
  /\bbeszelni (?:szeretnek |akarok )?(?:egy )?(?:ugyintezovel|emberrel|operatorral|munkatarssal)\b/,
];

/**
 * Requests for a person in scripts without word boundaries a regular expression can see (Cyrillic, CJK,
 * Korean, Arabic): matched as substrings of the cleaned text. Each names a human agent, so a hit is a request.
 */
const AGENT_PHRASES = [
  // Russian / Ukrainian
  'с оператором', 'с человеком', 'живого человека', 'живой человек', 'с менеджером', 'с сотрудником', 'с консультантом',
  'позовите оператора', 'соедините с', 'з оператором', 'з людиною', 'живу людину', 'з менеджером',
  // Japanese, Chinese, Korean
  '担当者', 'オペレーター', '人間と話', '人と話したい', 'スタッフと話', '有人対応', '人工客服', '转人工', '找人工', '要人工', '真人', '人工服务', '客服人员', '人工服務',
  '상담원', '상담사', '사람과 대화', '직원 연결', '직원과 대화',
  // Arabic
  'التحدث مع موظف', 'التحدث مع شخص', 'موظف خدمة العملاء', 'شخص حقيقي', 'أريد موظف',
].map((p) => clean(p));

function clean(text: string): string {
  return normalize(text).replace(/[^\p{L}\p{N}' ]+/gu, ' ').replace(/\s+/g, ' ').trim();
}

/** Single-word or very short messages that are themselves a request for a human. */
const SHORT_AGENT = new Set([
  'human', 'humans', 'person', 'agent', 'agents', 'operator', 'representative', 'rep', 'supervisor', 'manager',
  'staff', 'someone', 'somebody', 'humano', 'persona', 'agente', 'operador', 'asesor', 'humain', 'conseiller',
  'operateur', 'mensch', 'mitarbeiter', 'operatore', 'medewerker', 'mens', 'atendente', 'pessoa',
  'customer service', 'customer support', 'live agent', 'live chat', 'real person', 'human please',
  'live support', 'support', 'human help', 'human support', 'callback', 'call back', 'escalate', 'escalate this',
]);
const FILLER = new Set([
  'please', 'pls', 'plz', 'now', 'a', 'an', 'the', 'me', 'i', 'want', 'need', 'by', 'favor', 'por', 'svp',
  'bitte', 'per', 'favore', 'alstublieft', 'asap', 'just', 'ok', 'hey', 'hi', 'hello', 'can', 'get', 'give',
  'talk', 'to', 'speak', 'with', 'yes', 'un', 'una', 'um', 'uma', 'ein', 'einen', 'een', 'real', 'live',
]);

/**
 * A request that the words just before it negate: "please do NOT transfer me to an agent", "I don't want to
 * talk to a person". Only the words governing the request count, so "I'm not happy, get me a person" still asks.
 */
const NEGATED_BEFORE = /\b(?:do not|don't|dont|never|not|no need to)(?: (?:want|need|wish|ask) (?:you )?to)?(?: please)? $/;
const GLOBAL_PATTERNS = PATTERNS.map((p) => new RegExp(p.source, 'g'));
/**
 * Whether any of PATTERNS matches anywhere: their alternation matches at a position exactly when one of them does.
 * Most messages match none, and one scan answers that (under 2 µs on the eval questions) where matchAll over each
 * pattern cost ~26 µs, twice per chat message (the chat and the answerer both ask).
 */
const ANY_PATTERN = new RegExp(PATTERNS.map((p) => `(?:${p.source})`).join('|'));

/** True when the customer explicitly asks for a human, in any common phrasing (English and 20-odd other languages). */
export function detectHandoff(text: string): boolean {
  // Contact details are not words of the request: "a person please, jo@acme.test" is the short form.
  const withoutEmails = text.replace(EMAILS_IN_TEXT, ' ');
  const t = clean(withoutEmails);
  if (!t) return false;
  if (AGENT_PHRASES.some((p) => t.includes(p))) return true;
  if (shortRequest(t)) return true;
  // The short form as one clause of a longer message, said as a request: "agent please, I need help", "a person
  // please, thanks". A bare noun opening a clause is an address, not a request ("hi support, where is my order").
  // Only a message with a request word in it can have such a clause.
  if (REQUEST_MARKER.test(t)) {
    const clauses = normalize(withoutEmails).split(/[,.;:!?()\n-]+/).map(clean).filter(Boolean);
    if (clauses.length > 1 && clauses.some((c) => REQUEST_MARKER.test(c) && shortRequest(c))) return true;
  }
  if (!ANY_PATTERN.test(t)) return false;
  for (const p of GLOBAL_PATTERNS) {
    for (const m of t.matchAll(p)) if (!NEGATED_BEFORE.test(t.slice(0, m.index))) return true;
  }
  return false;
}

/** The whole (cleaned) text is a short request: "human", "a real person please", "customer service now". */
function shortRequest(t: string): boolean {
  const tokens = t.split(' ').filter((w) => !FILLER.has(w));
  return tokens.length > 0 && tokens.length <= 2 && SHORT_AGENT.has(tokens.join(' '));
}

const REQUEST_MARKER = /\b(?:please|pls|plz|now|asap)\b/;

/** Words that only make up a request for a person, left over once its matched phrase is taken out. */
const REQUEST_WORDS = new Set([...FILLER, ...[...SHORT_AGENT].flatMap((p) => p.split(' '))]);

/**
 * What a request for a person says besides the request: "talk to a human about my refund" → "about my refund",
 * so a conversation that went straight to a person still gets a topic. Cleaned text (lower case, no accents);
 * "" when the message is only the request.
 */
export function handoffRemainder(text: string): string {
  let t = clean(text);
  for (const p of GLOBAL_PATTERNS) t = t.replace(p, ' ');
  for (const p of AGENT_PHRASES) t = t.split(p).join(' ');
  return t
    .split(' ')
    .filter((w) => w && !REQUEST_WORDS.has(w))
    .join(' ');
}

const CONTINUATION = /^(?:and|also|plus|or|but|so|then|even|what about|how about|what if|same (?:for|with|goes for))\b/;
/** "for Canada?", "with paypal?": a preposition opening a few words only (a longer message says what it is about). */
const BARE_PHRASE = /^(?:for|to|in|with|via|from|by)\b/;
const REFERRING = new Set(['it', 'its', "it's", 'that', "that's", 'this', 'these', 'those', 'them', 'they', 'one', 'ones']);
/**
 * Analysed terms that ask about an attribute of something without naming it: a price, a time, a limit, whether it
 * is allowed ("is there a fee?", "how long?", "is there a limit?"). A short message of nothing else asks about the
 * previous subject: after "can I change my flight?", "is there a fee?" alone found the checked-baggage fees.
 */
const ATTRIBUTE_TERMS = new Set(['cost', 'charg', 'free', 'extra', 'long', 'time', 'dai', 'hour', 'week', 'month', 'limit', 'minimum', 'maximum', 'deadlin', 'possibl', 'allow', 'often']);

/** "why?", "how so?", "like what?", "what do you mean?": asking about the reply before, nothing more. */
const CLARIFY = /^(?:why|why not|how|how so|how come|really|what|what do you mean|meaning|such as|like what|for example|example|e ?g|in what way|which one|which ones|when|where)$/;

/**
 * A message that leans on the one before it and means little alone: it opens as a continuation ("and for
 * Canada?", "what about klarna?", "also express?"), it only asks "why?" or "what do you mean?", it is short and refers
 * back ("how long does it take?", "is that covered?"), or it is short and asks only for an attribute ("is there a
 * fee?", "how long?"). Only such a message is searched together with the previous question; a short message that
 * names its own subject ("can I pay with bitcoin") is a new question, and borrowing the previous one's words would
 * answer it from the previous article.
 */
export function leansOnPrevious(text: string): boolean {
  const t = clean(text);
  if (!t) return false;
  const words = t.split(' ');
  if (words.length > 12) return false;
  if (CONTINUATION.test(t) || CLARIFY.test(t)) return true;
  if (words.length <= 5 && BARE_PHRASE.test(t)) return true;
  if (words.length <= 6 && asksOnlyAttribute(text)) return true;
  return words.length <= 8 && words.some((w) => REFERRING.has(w));
}

/** Whether every word of a message that says anything asks about an attribute: "is there a fee?", "how much", "how long?". */
export function asksOnlyAttribute(text: string): boolean {
  const terms = analyze(text);
  return terms.length > 0 && terms.every((term) => ATTRIBUTE_TERMS.has(term));
}

const QUESTION_START = /^(?:how|what|whats|what's|when|where|why|who|which|whose|can|could|do|does|did|is|are|was|were|will|would|should|shall|may|might|have|has|any|anyone)\b/;

/** A message that asks something: it ends with a question mark or opens like a question ("how do I…", "can you…"). */
export function asksSomething(text: string): boolean {
  if (/\?\s*$/.test(text)) return true;
  return QUESTION_START.test(clean(text));
}

/** "yes please", "sure", "ok go ahead", "oui": a plain yes, in a few languages, and nothing else. */
const AFFIRMATIVE =
  /^(?:yes|yeah|yep|yup|ya|yea|sure|ok|okay|please|absolutely|definitely|of course|go ahead|please do|do it|si|oui|ja|sim|tak|yes i would|i would|that would be (?:great|good|nice|helpful))(?: (?:yes|please|pls|thanks|thank you|sure|go ahead|do|that would be (?:great|good|nice|helpful)|por favor|s'il vous plait|bitte))*$/;

/** True when the message is only a yes (to answer the assistant's offer to connect a person). */
export function isAffirmative(text: string): boolean {
  return AFFIRMATIVE.test(clean(text));
}

const NEGATIVE =
  /^(?:no|nope|nah|not now|not yet|no need|no thanks?|no thank you|never ?mind|i'?m (?:fine|good|ok|okay|all good)|(?:that'?s|it'?s) (?:ok|okay|fine|alright)|all good|don'?t bother|non|nein|nee)(?: (?:no|thanks?|thank you|i'?m (?:fine|good|ok|okay)|(?:that'?s|it'?s) (?:ok|okay|fine|alright)|not now|for now|all good|merci|danke|gracias))*$/;

/** True when the message is only a no ("no thanks", "nope, I'm fine"): to decline the assistant's offer of a person. */
export function isNegative(text: string): boolean {
  return NEGATIVE.test(clean(text));
}

const GREETING = /^(?:hi|hello|hey|hiya|howdy|yo|good (?:morning|afternoon|evening|day)|hola|buenos dias|buenas|bonjour|salut|hallo|guten (?:tag|morgen)|moin|ciao|buongiorno|ola|oi|bom dia|hoi|goedemiddag|goedemorgen)(?: there| team| all| folks)?$/;
const THANKS_WORD = String.raw`(?:thanks?|thank you|thx|ty|ta|cheers|much appreciated|great|perfect|awesome|cool|ok(?:ay)?|got it|gracias|merci|danke|grazie|obrigad[oa]|bedankt|dank je|super)`;
/** "thanks so much", "ok great, thank you": thanking words, each with its modifiers. */
const THANKS = new RegExp(
  String.raw`^${THANKS_WORD}(?: (?:${THANKS_WORD}|so much|a lot|very much|a bunch|again|anyway|anyways|mate|guys|for (?:the|your) help|for trying|beaucoup|schon|mille|wel))*$`,
);
const BYE = /^(?:bye|goodbye|good bye|see you|see ya|later|cya|adios|au revoir|tschuss|ciao|tot ziens|ate logo|that'?s all|nothing else|no thanks?)$/;

export type SmallTalkKind = 'greeting' | 'thanks' | 'bye' | 'presence' | 'unclear';

/** "are you still there?", "anyone there?", "hello, is anybody here": checking someone is listening, asking nothing. */
const PRESENCE =
  /^(?:(?:hi|hello|hey|um|so|ok|and) )*(?:are you (?:still )?(?:there|here|around|with me)|(?:is )?(?:anyone|anybody|someone|somebody) (?:still )?(?:there|here|around|home)|(?:you|u) (?:still )?there|still there|r u there)(?: (?:hello|please))?$/;

/** "hmm", "umm", "huh", "idk": a sound, not a question ("I don't know the answer to that" answered it). */
const SOUNDS = /^(?:h+m+|m+|u+m+|u+h+|huh|e+r+m*|eh|meh|idk|dunno|i dunno|wait|well|so|uh huh|hmm ok|hm ok)$/;

/** Pictures that say thanks or fine on their own: 👍 🙏 👌 ❤ and smiles. */
const THANKS_PICTURES = new Set(['\u{1F44D}', '\u{1F64F}', '\u{1F44C}', '\u2764', '\u{1F60A}', '\u{1F642}', '\u{1F600}', '\u{1F601}', '\u{1F603}', '\u{1F604}', '\u{1F970}', '\u{1F917}']);

/**
 * Classify messages that are pure greeting / thanks / goodbye (no question content), and messages without a
 * single letter or digit in any script ("😡😡😡", "??", "..."): `unclear`, which the assistant asks about rather
 * than counting as an unanswered question ("👍", "🙏" alone are thanks).
 */
export function smallTalkKind(text: string): SmallTalkKind | undefined {
  if (!text.trim()) return undefined;
  if (!/[\p{L}\p{N}]/u.test(text)) {
    const pictures = text.match(/\p{Extended_Pictographic}/gu) ?? [];
    return pictures.length > 0 && pictures.every((p) => THANKS_PICTURES.has(p)) ? 'thanks' : 'unclear';
  }
  const t = clean(text);
  if (!t) return undefined;
  if (GREETING.test(t)) return 'greeting';
  if (THANKS.test(t)) return 'thanks';
  if (BYE.test(t)) return 'bye';
  if (PRESENCE.test(t)) return 'presence';
  if (SOUNDS.test(t)) return 'unclear';
  // "thanks, bye", "ok great thank you, see you": thanks, then goodbye.
  const w = t.split(' ');
  for (let i = 1; i < w.length; i++) {
    if (THANKS.test(w.slice(0, i).join(' ')) && BYE.test(w.slice(i).join(' '))) return 'bye';
  }
  return undefined;
}

export function isGreetingOrSmallTalk(text: string): boolean {
  return smallTalkKind(text) !== undefined;
}

/** What a customer says of a reply that did not help, the whole message ("this is useless", "that's not what I asked"). */
const VERDICT = String.raw`(?:useless|pointless|unhelpful|not helpful|no help|no use|no good|wrong|incorrect|not right|not correct|not it|irrelevant|not relevant|rubbish|garbage|terrible|not helping|not my question|not the answer|not what i (?:asked|meant|wanted|need|needed|was asking)(?: for)?)`;
const DISSATISFIED = new RegExp(
  String.raw`^(?:(?:ugh|hmm+|meh|no|nope|sorry|well|but|seriously|honestly|wow|omg|ok|okay|um+|still)\s)*` +
    String.raw`(?:` +
    [
      // "this is useless", "that's not what i asked", "your answer is wrong", "you're not helping"
      String.raw`(?:this|that|it|you|your answer|the answer|this answer|that answer)(?: is| was|'s|s| are|'re|re)? (?:(?:really|totally|completely|absolutely|just|so|very|pretty|quite|still)\s)*${VERDICT}`,
      // "that doesn't help", "it didn't answer my question", "you don't understand"
      String.raw`(?:this|that|it|you|your answer|the answer)(?: still)? (?:doesn'?t|does not|didn'?t|did not|don'?t|do not) (?:help|answer (?:my|the) question|answer it|answer that|work|make sense|understand(?: me)?|get it)`,
      // "not helpful", "wrong answer", "useless bot"
      VERDICT,
      String.raw`(?:wrong|bad|useless|unhelpful) (?:answer|reply|response)`,
      String.raw`(?:stupid|useless|dumb|pointless) (?:bot|robot|assistant|machine|chat|chatbot)`,
      String.raw`(?:doesn'?t|didn'?t|does not|did not) help`,
    ].join('|') +
    String.raw`)(?:\s(?:at all|whatsoever|again|either|still|thanks|thank you|lol|mate|man|dude))*$`,
);

/**
 * True when the message only says the previous reply did not help: answering it from the knowledge base would
 * repeat that reply (read with the previous question, "this is useless" found the same article again), so the
 * assistant apologises and offers a person. Only a whole message: "that doesn't help, my order never came" asks
 * something new and is answered.
 */
export function isDissatisfied(text: string): boolean {
  const t = clean(text);
  return t !== '' && DISSATISFIED.test(t);
}
