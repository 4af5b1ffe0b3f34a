import { Type, type Static } from 'typebox';
import { TEXT_PATTERNS } from '../../http/schemas.js';

/** Each field's longest length; the dashboard's fields take theirs from here too. */
export const PERSONA_MAX_LENGTH = { name: 100, greeting: 1_000, tone: 200 } as const;

// The name and the tone are one line: the name is the persona of conversations (and their events), the tone a few
// words for an LLM provider.
const Name = Type.String({ minLength: 1, maxLength: PERSONA_MAX_LENGTH.name, pattern: TEXT_PATTERNS.singleLine.pattern });
const Greeting = Type.String({ minLength: 1, maxLength: PERSONA_MAX_LENGTH.greeting });
const Tone = Type.String({ minLength: 1, maxLength: PERSONA_MAX_LENGTH.tone, pattern: TEXT_PATTERNS.singleLine.pattern, description: 'a few words, e.g. "friendly and concise"' });

export const AssistantSettings = Type.Object({ name: Type.String(), greeting: Type.String(), tone: Type.String() });
export type AssistantSettings = Static<typeof AssistantSettings>;

export const UpdateAssistantSettingsBody = Type.Object(
  { name: Type.Optional(Name), greeting: Type.Optional(Greeting), tone: Type.Optional(Tone) },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateAssistantSettingsBody = Static<typeof UpdateAssistantSettingsBody>;

export const DEFAULT_SETTINGS: AssistantSettings = {
  name: 'Assistant',
  greeting: "Hi! I'm {name}, the virtual assistant. How can I help you today?",
  tone: 'friendly and concise',
};

/** The default greeting while the persona still has the default name: not "Hi! I'm Assistant, the virtual assistant". */
export const UNNAMED_GREETING = "Hi! I'm the virtual assistant. How can I help you today?";

/** True for a persona name an owner chose (not the default "Assistant"), which the assistant introduces itself by. */
export const isChosenName = (name: string | undefined): name is string => !!name && name !== DEFAULT_SETTINGS.name;
