import { test } from 'node:test';
import assert from 'node:assert/strict';
import { detectHandoff, isAffirmative, isDissatisfied, isGreetingOrSmallTalk, isNegative, smallTalkKind } from '../../../src/modules/assistant/intent.js';

const POSITIVE = [
  'can someone from billing look at it',
  'could somebody from your team look into this?',
  'is there someone I can talk to',
  'can anyone check my account please',
  'talk to a person',
  'agent please',
  'Agent!!',
  'operator',
  'HUMAN',
  'representative',
  'Can I speak with a representative?',
  'I want to talk to a real person',
  'connect me to a live agent',
  'transfer me to customer service',
  'put me through to someone from your support team',
  'get me a manager',
  'this bot is useless, get me a human',
  'Is there an actual person I can chat with?',
  "I'd like to speak to someone, please",
  'Quiero hablar con una persona',
  '¿Puedo hablar con un agente?',
  'Je voudrais parler à un conseiller',
  'Puis-je parler avec quelqu’un ?',
  'Ich möchte mit einem Menschen sprechen',
  'Kann ich mit einem Mitarbeiter sprechen?',
  'Quero falar com um atendente',
  'Posso falar com uma pessoa?',
  'Vorrei parlare con un operatore',
  'Posso parlare con una persona?',
  'Ik wil met een medewerker spreken',
  'Kan ik praten met een mens?',
  'can a human please look at my account',
  'Could a real person help me with this?',
  'could somebody from your office ring me back',
  'I need one of your agents to phone me',
  'Czy mogę porozmawiać z pracownikiem?',
  'chce rozmawiac z czlowiekiem',
  'quero falar com um funcionário',
  'please escalate this',
  'can I get a callback?',
  'I would like a call back please',
  'get a person on the line',
  'can you get someone to email me',
  'need human help',
  'live support please',
  'I want to file a complaint with a person',
  'can I speak with the team',
  'Jag vill prata med en människa',
  'Kan jeg tale med et menneske?',
  'Kan jeg snakke med en person?',
  'Haluan puhua ihmisen kanssa',
  'Хочу поговорить с оператором',
  'Можно живого человека?',
  'Хочу поговорити з оператором',
  'Bir temsilciyle görüşmek istiyorum',
  'Vreau să vorbesc cu un operator',
  'Chci mluvit s operátorem',
  'Ügyintézővel szeretnék beszélni',
  '担当者と話したいです',
  'オペレーターにつないでください',
  '转人工',
  '我要人工客服',
  '상담원 연결해 주세요',
  'أريد التحدث مع موظف',
  // The short form as one clause, and contact details beside it (docs/chat.md's own example)
  'a person please, jo@acme.test',
  'agent please, I need help',
  'a person please, thanks',
  'ik wil een medewerker spreken',
  'müşteri temsilcisiyle görüşmek istiyorum',
  'beszélni szeretnék egy ügyintézővel',
  '我要找人工',
  '人と話したい',
];

const NEGATIVE = [
  'can someone else use my account?',
  'can someone pick up my order for me',
  'can someone explain the fee',
  'someone stole my card',
  'What are your customer service hours?',
  'what size helmet for a person with a 57cm head?',
  'Can someone else pick up my order for me?',
  'Can a person other than me check in for the booking?',
  'How do I contact customer service by email?',
  'Do you ship to PO boxes?',
  'my order status says Received',
  'Is the personal information I give you safe?',
  'Which agent handles my shipment, UPS or USPS?',
  'Can I talk to you about a return?',
  'Quiero devolver una persona... digo, un casco',
  'Ich möchte mit einem Freund bestellen',
  'hola',
  'will the courier call me before delivery?',
  'can the driver ring me back when he is outside',
  'Czy mogę zwrócić kask?',
  'how do I escalate a warranty claim?',
  'will the driver call back?',
  'do you offer a callback service for deliveries?',
  'is the gift card shareable with a person in another country?',
  'what does the team plan cost?',
  'support hours?',
  'does the warranty support carbon rims',
  'Jag vill returnera min hjälm',
  'Hvor lang tid tager levering?',
  'Сколько стоит доставка?',
  'Kargo ücreti ne kadar?',
  '配送にはどのくらいかかりますか',
  '运费多少钱',
  '배송은 얼마나 걸리나요',
  // A bare noun opening a clause addresses the team; it does not ask for a person
  'hi support, where is my order?',
  'staff, please note my order number is 123',
  '我想了解人工智能',
];

// A negated request is not one; a negation elsewhere in the message does not cancel a request.
const NEGATED = [
  'please do NOT transfer me to an agent, just answer the question',
  "I don't want to talk to a person, where is my parcel?",
  'no need to connect me with a human, I found it',
  'never put me through to a supervisor again',
];
const STILL_ASKING = [
  "I'm not happy with this, get me a person",
  "I don't want to talk to a machine. Real person. Now.",
  'this is not working, can I speak to someone',
];
for (const msg of NEGATED) {
  test(`negated, not handoff: ${msg}`, () => assert.equal(detectHandoff(msg), false));
}
for (const msg of STILL_ASKING) {
  test(`negation elsewhere, still handoff: ${msg}`, () => assert.equal(detectHandoff(msg), true));
}

for (const msg of POSITIVE) {
  test(`handoff: ${msg}`, () => assert.equal(detectHandoff(msg), true));
}
for (const msg of NEGATIVE) {
  test(`not handoff: ${msg}`, () => assert.equal(detectHandoff(msg), false));
}

test('a plain yes is affirmative, a plain no negative; with a question or a request, neither', () => {
  for (const m of ['yes', 'Yes please!', 'yeah sure', 'ok go ahead', 'please do', 'that would be great, thanks', 'oui', 'sí por favor']) assert.equal(isAffirmative(m), true, m);
  for (const m of ['yes, but where is my order?', 'no thanks', 'not yet', 'yes I want a refund', '']) assert.equal(isAffirmative(m), false, m);
  for (const m of ['no', 'No thanks', "nope, I'm fine", 'not now', "I'm good, thanks", "that's ok", 'nah', 'never mind', 'non merci']) assert.equal(isNegative(m), true, m);
  for (const m of ['no I want a refund', 'not working', 'no tracking info yet', 'yes', 'nobody answered', '']) assert.equal(isNegative(m), false, m);
});

test('a message that only says the reply did not help is dissatisfied; a new problem or question is not', () => {
  for (const m of ['ugh this is useless', "That doesn't help.", 'not helpful', "that's not what I asked", "you're not helping", "this didn't answer my question", 'wrong answer', 'useless bot', "no, that's wrong", 'that is not helpful at all', "it doesn't work", "you don't understand", 'Useless!!', 'that is not what i was asking for', 'nope, still wrong']) {
    assert.equal(isDissatisfied(m), true, m);
    assert.equal(detectHandoff(m), false, m);
  }
  for (const m of ['this is the wrong size', "it doesn't fit", 'my order is wrong', "the app doesn't work on my phone", 'is that helpful for returns?', 'thanks that helps', 'that helps', 'wrong item delivered', 'no', 'ok', 'where is my order', "that doesn't help, my order never came", 'I got the wrong bike', '']) {
    assert.equal(isDissatisfied(m), false, m);
  }
});

test('a sound is unclear small talk, not a question ("hmm", "umm", "huh", "idk")', () => {
  for (const m of ['hmm', 'Hmmm...', 'umm', 'uh', 'huh?', 'erm', 'idk', 'well']) assert.equal(smallTalkKind(m), 'unclear', m);
  for (const m of ['hmm where is my order', 'umbrella', 'huh, my card was declined']) assert.equal(smallTalkKind(m), undefined, m);
});

test('thanks however said ("thanks anyway", "ok ta", "thanks for trying")', () => {
  for (const m of ['thanks anyway', 'ok ta', 'ta', 'thanks for trying', 'ok thanks anyway']) assert.equal(smallTalkKind(m), 'thanks', m);
  for (const m of ['ta da', 'thanks, but where is my order?']) assert.notEqual(smallTalkKind(m), 'thanks', m);
});

test('small talk', () => {
  assert.equal(smallTalkKind('Hi!'), 'greeting');
  assert.equal(smallTalkKind('thanks so much'), 'thanks');
  assert.equal(smallTalkKind('bye'), 'bye');
  assert.equal(smallTalkKind('thanks, bye!'), 'bye');
  assert.equal(smallTalkKind('ok great thank you, see you'), 'bye');
  assert.equal(smallTalkKind('thanks, where is my order'), undefined);
  // Checking someone is listening asks nothing: not an unanswered question
  for (const m of ['are you still there?', 'hello? anyone there?', 'is anybody here', 'you there??']) assert.equal(smallTalkKind(m), 'presence', m);
  assert.equal(smallTalkKind('are you there on saturdays?'), undefined);
  // Nothing but pictures or punctuation: asked about, not an unanswered question; a thumbs up is thanks.
  for (const m of ['😡😡😡', '???', '...', '🤔', '👍😡']) assert.equal(smallTalkKind(m), 'unclear', m);
  for (const m of ['👍', '🙏🏽', '❤️❤️', '👌 🙂']) assert.equal(smallTalkKind(m), 'thanks', m);
  // A question in another script has letters: it is a question, not unclear.
  assert.equal(smallTalkKind('Где мой заказ?'), undefined);
  assert.equal(smallTalkKind('我的订单在哪里？'), undefined);
  assert.equal(isGreetingOrSmallTalk('hi, where is my order?'), false);
  assert.equal(isGreetingOrSmallTalk('How long does shipping take?'), false);
});
