import { test } from 'node:test';
import assert from 'node:assert/strict';
import { analyseMessage, compileTrigger, extractFields, matchesTrigger, patternProblem } from '../../../src/modules/workflows/matching.js';

const matches = (phrase: string, message: string) => matchesTrigger(analyseMessage(message), compileTrigger(phrase));

test('a trigger matches when every content word of the phrase is in the message, stemmed, in any order', () => {
  assert.ok(matches('book a demo', 'Could I book a demo for Tuesday?'));
  assert.ok(matches('book a demo', 'booking demos for my team'));
  assert.ok(matches('book a demo', 'a demo — can I book one?'));
  assert.ok(!matches('book a demo', 'I watched the demo video'));
  assert.ok(!matches('cancel my subscription', 'how do I pause my subscription'));
  // one typo in a long word is forgiven; short words must be exact
  assert.ok(matches('schedule a demo', 'can I scheduel a demo'));
  assert.ok(matches('cancel my subscription', 'pls cancle my subscription'));
  assert.ok(!matches('book a demo', 'book a dema'));
  assert.ok(!matches('schedule a demo', 'can I schdl a demo'));
  // typos are looked for on words as written (stems of misspelt words are cut elsewhere), a swap is one typo
  for (const [phrase, message] of [
    ['delete account', 'please delte my account'],
    ['delete account', 'please deleet my account'],
    ['change password', 'chnage password'],
    ['cancel subscription', 'cancel my subscrption'],
    ['update billing', 'updte billing'],
    ['schedule a demo', 'shcedule a demo'],
    ['send a request', 'send a reqeust'],
    ['upgrade plan', 'upgarde plan'],
    ['delivery address', 'delivry address'],
  ]) {
    assert.ok(matches(phrase!, message!), `${phrase} ~ ${message}`);
  }
  assert.ok(!matches('delete account', 'please dlt my account'), 'two typos');
  // other scripts are words too
  assert.ok(matches('забронировать демо', 'Хочу забронировать демо на вторник'));
  assert.ok(!matches('забронировать демо', 'Хочу посмотреть демо'));
  assert.ok(matches('预约演示', '我想预约演示，可以吗？'));
  assert.ok(matches('Straße ändern', 'ich möchte die strasse andern'));
  assert.ok(!matches('update plan', 'upd plan'));
  // synonyms of the assistant's analysis apply: "money back" is refund
  assert.ok(matches('refund request', 'I want my money back, this is a request'));
});

test('a phrase of stopwords only is matched as words in sequence', () => {
  const c = compileTrigger('I want to');
  assert.deepEqual(c.terms, []);
  assert.ok(matches('I want to', 'hello, I want to talk'));
  assert.ok(!matches('I want to', 'to want I'));
  assert.ok(!matches('I want to', 'I wanted to'));
});

test('labelled values are found for every type; the newest message wins', () => {
  const fields = [
    { key: 'company', type: 'text' as const },
    { key: 'seats', type: 'number' as const },
    { key: 'workEmail', type: 'email' as const },
    { key: 'phone', type: 'phone' as const },
  ];
  const texts = [
    'Hi, my company is Initech, we need 40 seats',
    'sorry, company: Acme Ltd. Seats = 12; work email: jo@acme.test, phone +44 20 7946 0958',
  ];
  assert.deepEqual(extractFields(fields, texts, null), { company: 'Acme Ltd', seats: 12, workEmail: 'jo@acme.test', phone: '+44 20 7946 0958' });
  assert.deepEqual(extractFields(fields, texts.slice(0, 1), null), { company: 'Initech', seats: 40 }, 'a count before its noun');
  assert.deepEqual(extractFields([{ key: 'company', type: 'text' }], ['my company is Acme Widgets International and we need help'], null), { company: 'Acme Widgets International' });
  assert.deepEqual(extractFields([{ key: 'seats', type: 'number' }], ['order 58213: we need 12 seats'], null), { seats: 12 });
});

test('unlabelled values are taken by shape, and only when unambiguous for numbers', () => {
  const email = { key: 'email', type: 'email' as const };
  const phone = { key: 'callback', type: 'phone' as const };
  const qty = { key: 'quantity', type: 'number' as const };
  const name = { key: 'name', type: 'text' as const };
  assert.deepEqual(extractFields([email, phone], ['reach me on jo@example.org or 020 7946 0958'], null), { email: 'jo@example.org', callback: '020 7946 0958' });
  assert.deepEqual(extractFields([qty], ['I need 3 of them'], null), { quantity: 3 });
  assert.deepEqual(extractFields([qty], ['2 wheels and order 58213'], null), {}, 'two numbers: which one is meant is unknown');
  assert.deepEqual(extractFields([name], ['Jo Bloggs here'], null), {}, 'text has no shape');
  assert.deepEqual(extractFields([phone], ['call me at 12345'], null), {}, 'too few digits for a phone number');
  // the conversation's known email is the last resort
  assert.deepEqual(extractFields([email], ['no address here'], 'known@example.org'), { email: 'known@example.org' });
  assert.deepEqual(extractFields([email], ['use new@example.org'], 'known@example.org'), { email: 'new@example.org' });
});

test('a number field is a JSON number or absent: written forms customers use are read, anything else is left out', () => {
  const qty = { key: 'qty', type: 'number' as const };
  const read = (text: string) => extractFields([qty], [text], null).qty;
  const cases: Array<[string, number | undefined]> = [
    ['qty: 12', 12],
    ['qty: -3', -3],
    ['qty: 4.5', 4.5],
    ['qty: 4,5', 4.5],
    ['qty: .5', 0.5],
    ['qty: 1,234', 1234],
    ['qty: 1,234.56', 1234.56],
    ['qty: 1.000.000', 1000000],
    ['qty: 1.234,56', 1234.56],
    ['qty: 1,2,3', undefined],
    ['qty: 1.2.3', undefined],
  ];
  for (const [text, expected] of cases) assert.equal(read(text), expected, text);
  assert.deepEqual(extractFields([qty], ['order number: 1.000.000'], null), { qty: 1000000 }, 'unlabelled, one number');
});

test('a phone field skips phone-shaped runs that are not one (too few digits, a date) for the next', () => {
  const tel = { key: 'tel', type: 'phone' as const };
  assert.deepEqual(extractFields([tel], ['items 1 2 3 4 and call me on 0612345678'], null), { tel: '0612345678' });
  assert.deepEqual(extractFields([tel], ['I was born 2026-11-24'], null), {});
  assert.deepEqual(extractFields([tel], ['since 24/11/2026, my number is +33 6 12 34 56 78'], null), { tel: '+33 6 12 34 56 78' });
});

test('pattern fields take their first capture group, else the whole match', () => {
  assert.deepEqual(extractFields([{ key: 'order', type: 'pattern', pattern: 'ORD-(\\d{4,})' }], ['about ord-58213 please'], null), { order: '58213' });
  assert.deepEqual(extractFields([{ key: 'sku', type: 'pattern', pattern: '[A-Z]{2}\\d{3}' }], ['sku ab123'], null), { sku: 'ab123' });
  assert.deepEqual(extractFields([{ key: 'sku', type: 'pattern', pattern: '[A-Z]{2}\\d{3}' }], ['nothing'], null), {});
});

test('broken patterns, and what RE2 cannot run, are refused with the reason', () => {
  assert.equal(patternProblem('ORD-(\\d+)'), null);
  assert.equal(patternProblem('[A-Z]{2}\\d{3,6}'), null);
  assert.match(patternProblem('(')!, /not a valid regular expression/);
  assert.match(patternProblem('(a)\\1')!, /back-references or look-arounds/);
  assert.match(patternProblem('ORD-(?=\\d)')!, /back-references or look-arounds/);
  assert.match(patternProblem('(?<!x)y')!, /back-references or look-arounds/);
});

test('patterns run in linear time: the shapes of catastrophic backtracking are harmless', () => {
  // Each of these takes seconds to minutes on 29 characters with RegExp (the first two passed the former syntax guard).
  const evil = `${'a'.repeat(28)}!`;
  for (const pattern of ['((a)+)+$', '(a|a)*$', '(a|aa)+$', '(a+)+$', '(\\w*)*x']) {
    assert.equal(patternProblem(pattern), null, pattern);
    const started = performance.now();
    assert.deepEqual(extractFields([{ key: 'k', type: 'pattern', pattern }], [evil, `${'a'.repeat(990)}!`], null), {}, pattern);
    const ms = performance.now() - started;
    // RegExp needs > 10 s here; RE2 a few milliseconds. 1 s leaves room for a loaded machine.
    assert.ok(ms < 1_000, `${pattern} took ${ms.toFixed(0)} ms`);
  }
  // …and still extract what they match
  assert.deepEqual(extractFields([{ key: 'k', type: 'pattern', pattern: '((a)+)+b' }], ['xx aaab yy'], null), { k: 'aaa' }); // its first group
});

test('customer text is cut before a pattern runs on it', () => {
  const long = `${'x'.repeat(1_000)} ORD-1234`;
  assert.deepEqual(extractFields([{ key: 'order', type: 'pattern', pattern: 'ORD-(\\d+)' }], [long], null), {});
});
