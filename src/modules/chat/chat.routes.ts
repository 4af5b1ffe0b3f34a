import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { IdParams, responses } from '../../http/schemas.js';
import { ContactBody, ConversationOnly, EndBody, EscalateBody, SendMessageBody, SentMessages, StartConversationBody, StartedConversation } from './chat.schemas.js';

export const chatRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.chat;
    const tags = ['Chat'];
    const config = { scope: 'chat' as const };

    app.post('/chat/conversations', {
      config,
      schema: { tags, summary: 'Start a conversation (the greeting is included)', body: StartConversationBody, response: responses(201, StartedConversation) },
      handler: async (req, reply) => {
        reply.code(201);
        return { success: true as const, data: await svc.start(req.auth.accountId, req.body ?? {}) };
      },
    });
    app.get('/chat/conversations/:id', {
      config,
      schema: { tags, summary: 'The conversation as the customer sees it', params: IdParams, response: responses(200, ConversationOnly, [404]) },
      handler: async (req) => ({ success: true as const, data: { conversation: await svc.get(req.auth.accountId, req.params.id) } }),
    });
    app.post('/chat/conversations/:id/messages', {
      config,
      schema: { tags, summary: "Send the customer's message; answers it with the assistant's reply", params: IdParams, body: SendMessageBody, response: responses(200, SentMessages, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.send(req.auth.accountId, req.params.id, req.body.content) }),
    });
    app.post('/chat/conversations/:id/contact', {
      config,
      schema: { tags, summary: 'Leave contact details for a person to follow up', params: IdParams, body: ContactBody, response: responses(200, ConversationOnly, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.contact(req.auth.accountId, req.params.id, req.body) }),
    });
    app.post('/chat/conversations/:id/escalate', {
      config,
      schema: { tags, summary: 'Hand the conversation to a person', params: IdParams, body: EscalateBody, response: responses(200, ConversationOnly, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.escalate(req.auth.accountId, req.params.id, req.body ?? {}) }),
    });
    app.post('/chat/conversations/:id/end', {
      config,
      schema: { tags, summary: 'End the conversation', params: IdParams, body: EndBody, response: responses(200, ConversationOnly, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.end(req.auth.accountId, req.params.id) }),
    });
  };
