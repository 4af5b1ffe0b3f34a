import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Deleted, IdParams, responses } from '../../http/schemas.js';
import type { AppContext } from '../../context.js';
import { keptReads } from '../../http/versioned-answers.js';
import {
  CreateFaqBody,
  FaqList,
  FaqRecord,
  ListFaqsQuery,
  UpdateFaqBody,
} from './faqs.schemas.js';

export const faqsRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.faqs;
    const tags = ['FAQs'];
    // As the documents reads (documents.routes.ts): answers kept per knowledge version, which every FAQ write bumps
    // in its own transaction, rundowns' suggested FAQs included.
    const versioned = keptReads((accountId) => svc.knowledgeVersion(accountId));

    app.get('/faqs', {
      config: { scope: 'faqs:read' },
      schema: { tags, summary: 'List faqs', querystring: ListFaqsQuery, response: responses(200, FaqList) },
      handler: (req, reply) => {
        const q = req.query;
        const key = `list\0${q.status ?? 'all'}\0${q.category ?? ''}\0${q.limit}\0${q.offset}`;
        return versioned(req.auth.accountId, key, reply, () => svc.list(req.auth.accountId, q));
      },
    });

    app.get('/faqs/:id', {
      config: { scope: 'faqs:read' },
      schema: { tags, summary: 'Get an FAQ', params: IdParams, response: responses(200, FaqRecord, [404]) },
      handler: (req, reply) => versioned(req.auth.accountId, `get\0${req.params.id}`, reply, () => svc.get(req.auth.accountId, req.params.id)),
    });

    app.post('/faqs', {
      config: { scope: 'faqs:write' },
      schema: { tags, summary: 'Create an FAQ', body: CreateFaqBody, response: responses(201, FaqRecord) },
      handler: async (req, reply) => {
        reply.code(201);
        return { success: true as const, data: await svc.create(req.auth.accountId, req.body) };
      },
    });

    app.put('/faqs/:id', {
      config: { scope: 'faqs:write' },
      schema: {
        tags,
        summary: 'Update an FAQ (merges the given fields)',
        params: IdParams,
        body: UpdateFaqBody,
        response: responses(200, FaqRecord, [404]),
      },
      handler: async (req) => ({ success: true as const, data: await svc.update(req.auth.accountId, req.params.id, req.body) }),
    });

    app.delete('/faqs/:id', {
      config: { scope: 'faqs:write' },
      schema: { tags, summary: 'Delete an FAQ', params: IdParams, response: responses(200, Deleted, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.delete(req.auth.accountId, req.params.id) }),
    });
  };
