import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { IdParams, responses } from '../../http/schemas.js';
import { CreateRundownBody, ListRundownsQuery, RundownList, RundownRecord } from './rundowns.schemas.js';

export const rundownsRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.rundowns;
    const tags = ['Rundowns'];

    app.get('/rundowns', {
      config: { scope: 'rundowns:read' },
      schema: { tags, summary: 'List rundowns (newest first)', querystring: ListRundownsQuery, response: responses(200, RundownList) },
      handler: async (req) => ({ success: true as const, data: await svc.list(req.auth.accountId, req.query) }),
    });

    app.get('/rundowns/:id', {
      config: { scope: 'rundowns:read' },
      schema: { tags, summary: 'Get a rundown', params: IdParams, response: responses(200, RundownRecord, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.get(req.auth.accountId, req.params.id) }),
    });

    app.post('/rundowns', {
      config: { scope: 'rundowns:write' },
      schema: {
        tags,
        summary: 'Generate a rundown of [from, to) now (files its suggested FAQs as pending and emits rundown.generated)',
        body: CreateRundownBody,
        response: responses(201, RundownRecord),
      },
      handler: async (req, reply) => {
        reply.code(201);
        return { success: true as const, data: await svc.create(req.auth.accountId, req.body) };
      },
    });
  };
