import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { Deleted, IdParams, responses } from '../../http/schemas.js';
import { ConversationList, ConversationRecord, CustomerErased, EraseCustomerQuery, ListConversationsQuery } from './conversations.schemas.js';

export const conversationsRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.conversations;
    const tags = ['Conversations'];

    app.get('/conversations', {
      config: { scope: 'conversations:read' },
      schema: {
        tags,
        summary: 'List conversations (newest first)',
        querystring: ListConversationsQuery,
        response: responses(200, ConversationList),
      },
      handler: async (req) => ({ success: true as const, data: await svc.list(req.auth.accountId, req.query) }),
    });

    app.get('/conversations/:id', {
      config: { scope: 'conversations:read' },
      schema: { tags, summary: 'Get a conversation with its messages', params: IdParams, response: responses(200, ConversationRecord, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.get(req.auth.accountId, req.params.id) }),
    });

    app.delete('/conversations/:id', {
      config: { scope: 'conversations:write' },
      schema: {
        tags,
        summary: 'Erase a conversation',
        description:
          'Deletes the conversation, its messages and workflow runs, the events emitted about it and their webhook deliveries (a pending one is not sent), ' +
          "for a customer's request to erase their data. What was already delivered to webhooks is not recalled; analytics stop counting it, rundowns already made keep their figures.",
        params: IdParams,
        response: responses(200, Deleted, [404]),
      },
      handler: async (req) => ({ success: true as const, data: await svc.erase(req.auth.accountId, req.params.id) }),
    });

    app.delete('/conversations', {
      config: { scope: 'conversations:write' },
      schema: {
        tags,
        summary: "Erase every conversation of one customer",
        description:
          'Erases each conversation whose customerId is the one given, as DELETE /conversations/{id} does (each emits its own conversation.erased), ' +
          'for a customer who asks to have all their data deleted. customerId is required. Answers how many were erased: 0 when none are left, ' +
          'so a repeated request (a retry whose answer was lost) succeeds too. A request cut off part-way leaves the rest for the next one.',
        querystring: EraseCustomerQuery,
        response: responses(200, CustomerErased),
      },
      handler: async (req) => ({ success: true as const, data: await svc.eraseCustomer(req.auth.accountId, req.query.customerId) }),
    });
  };
