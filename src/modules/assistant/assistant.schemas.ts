import { Type, type Static } from 'typebox';
import { StringEnum, TEXT_PATTERNS } from '../../http/schemas.js';

/** Each field's longest length; the dashboard's fields take theirs from here too. */
export const PERSONA_MAX_LENGTH = { name: 100, greeting: 1_000, tone: 200 } as const;

// The name and the tone are one line: the name is the persona of conversations (and their events), the tone a few
// words for an LLM provider.
const Name = Type.String({ minLength: 1, maxLength: PERSONA_MAX_LENGTH.name, pattern: TEXT_PATTERNS.singleLine.pattern });
const Greeting = Type.String({ minLength: 1, maxLength: PERSONA_MAX_LENGTH.greeting });
const Tone = Type.String({ minLength: 1, maxLength: PERSONA_MAX_LENGTH.tone, pattern: TEXT_PATTERNS.singleLine.pattern, description: 'a few words, e.g. "friendly and concise"' });

/**
 * Minimum confidence to answer: the lowest threshold at which the model, judged leave-one-set-out on the held-out
 * sets, abstains on at least 85% of unanswerable questions (the target) — so it holds on knowledge bases the
 * model has not seen. Chosen without looking at eval set A; bench/eval/calibrate.ts prints the trade-off table
 * and applies the rule. An account may set its own (`minConfidence` below).
 */
export const DEFAULT_MIN_CONFIDENCE = 0.55;
/** The range an account's bar may be set in: at 0 or 1 it would answer everything or nothing. */
export const MIN_CONFIDENCE_RANGE = { minimum: 0.05, maximum: 0.95 } as const;

const MinConfidence = Type.Number({
  ...MIN_CONFIDENCE_RANGE,
  description: `the confidence (0–1) the assistant needs to answer from the knowledge base; below it, it says it does not know and offers a person. Lower answers more questions and more of them wrongly; higher abstains more. Default ${DEFAULT_MIN_CONFIDENCE}; POST /v1/assistant/preview shows a message's confidence`,
});

export const AssistantSettings = Type.Object({ name: Type.String(), greeting: Type.String(), tone: Type.String(), minConfidence: Type.Number() });
export type AssistantSettings = Static<typeof AssistantSettings>;

export const UpdateAssistantSettingsBody = Type.Object(
  {
    name: Type.Optional(Name),
    greeting: Type.Optional(Greeting),
    tone: Type.Optional(Tone),
    // null: back to the default (which then follows the service's own calibration).
    minConfidence: Type.Optional(Type.Union([MinConfidence, Type.Null()])),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateAssistantSettingsBody = Static<typeof UpdateAssistantSettingsBody>;

export const DEFAULT_SETTINGS: AssistantSettings = {
  name: 'Assistant',
  greeting: "Hi! I'm {name}, the virtual assistant. How can I help you today?",
  tone: 'friendly and concise',
  minConfidence: DEFAULT_MIN_CONFIDENCE,
};

/** The default greeting while the persona still has the default name: not "Hi! I'm Assistant, the virtual assistant". */
export const UNNAMED_GREETING = "Hi! I'm the virtual assistant. How can I help you today?";

/** True for a persona name an owner chose (not the default "Assistant"), which the assistant introduces itself by. */
export const isChosenName = (name: string | undefined): name is string => !!name && name !== DEFAULT_SETTINGS.name;

/** The longest message a customer may send (the chat's, and a preview's). */
export const MESSAGE_MAX_LENGTH = 4_000;
const MessageText = Type.String({ minLength: 1, maxLength: MESSAGE_MAX_LENGTH });
export const PREVIEW_HISTORY_MAX = 20;

export const PreviewBody = Type.Object(
  {
    content: Type.String({ minLength: 1, maxLength: MESSAGE_MAX_LENGTH, description: "the customer's message, as the chat would receive it" }),
    history: Type.Optional(
      Type.Array(
        Type.Object({ role: StringEnum(['customer', 'assistant'] as const), content: MessageText }, { additionalProperties: false }),
        {
          maxItems: PREVIEW_HISTORY_MAX,
          description: 'the conversation so far, oldest first: a follow-up ("and for Canada?", "is it free?") is read with the question before it, and a passage already given is not given again',
        },
      ),
    ),
  },
  { additionalProperties: false },
);
export type PreviewBody = Static<typeof PreviewBody>;

const PreviewMatch = Type.Object({
  id: Type.String(),
  type: StringEnum(['document', 'faq'] as const),
  title: Type.String({ description: "the document's title, or the FAQ's question" }),
  passage: Type.String({ description: "the document's paragraph that matched best, or the FAQ's answer" }),
  coverage: Type.Number({ description: "share (0..1) of the message's words found in this source, rarer words weighing more" }),
});

export const AssistantPreview = Type.Object({
  outcome: StringEnum(['answer', 'no_answer', 'handoff', 'smalltalk'] as const, {
    description: 'answer: from the sources; no_answer: it says it does not know and offers a person; handoff: a request for a person; smalltalk: a greeting, thanks and the like',
  }),
  reply: Type.String({ description: 'what the assistant answers' }),
  sources: Type.Array(Type.String(), { description: 'ids of the documents and FAQs the reply cites, best first (as a message carries them)' }),
  confidence: Type.Union([Type.Number(), Type.Null()], { description: 'how sure it is that the best source answers the message (0..1); null when the message is not a question for the knowledge base (handoff, smalltalk)' }),
  minConfidence: Type.Number({ description: "the confidence at which it answers (the account's setting, GET /v1/settings/assistant); below it, no_answer" }),
  provider: StringEnum(['default', 'llm'] as const, { description: 'llm: the configured LLM wrote the reply; default: the built-in answerer did' }),
  matches: Type.Array(PreviewMatch, {
    description: 'the published sources that match the message best, best first (at most 5), also when it was not answered: what it nearly used',
  }),
});
export type AssistantPreview = Static<typeof AssistantPreview>;
