import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { responses } from '../../http/schemas.js';
import { AssistantSettings, UpdateAssistantSettingsBody } from './assistant.schemas.js';

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
  };
