import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { responses } from '../../http/schemas.js';
import { AssistantPreview, AssistantSettings, PreviewBody, UpdateAssistantSettingsBody } from './assistant.schemas.js';

// The persona is knowledge-side configuration, so it shares the documents scopes.
export const assistantRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.assistant;
    const tags = ['Assistant'];
    app.get('/settings/assistant', {
      config: { scope: 'documents:read' },
      schema: { tags, summary: "The assistant's persona", response: responses(200, AssistantSettings) },
      handler: async (req) => ({ success: true as const, data: await svc.settings(req.auth.accountId) }),
    });
    app.put('/settings/assistant', {
      config: { scope: 'documents:write' },
      schema: { tags, summary: "Update the assistant's persona (merges)", body: UpdateAssistantSettingsBody, response: responses(200, AssistantSettings) },
      handler: async (req) => ({ success: true as const, data: await svc.updateSettings(req.auth.accountId, req.body) }),
    });
    // Reads both kinds of knowledge (its reply and matches quote documents and FAQs) and writes nothing; an LLM, when
    // configured, is asked as it would be in a conversation (and costs the same).
    app.post('/assistant/preview', {
      config: { scope: 'documents:read', alsoScope: 'faqs:read' },
      schema: {
        tags,
        summary: 'What the assistant would answer to a message, and the sources that match it best (no conversation is made)',
        body: PreviewBody,
        response: responses(200, AssistantPreview),
      },
      handler: async (req) => ({ success: true as const, data: await svc.preview(req.auth.accountId, req.body) }),
    });
  };
