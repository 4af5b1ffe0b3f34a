import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { responses } from '../../http/schemas.js';
import { Overview, OverviewQuery, TopicList, TopicsQuery } from './analytics.schemas.js';

export const analyticsRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.analytics;
    const tags = ['Analytics'];

    app.get('/analytics/overview', {
      config: { scope: 'analytics:read' },
      schema: { tags, summary: 'Headline figures over conversations created in [from, to)', querystring: OverviewQuery, response: responses(200, Overview) },
      handler: async (req) => ({ success: true as const, data: await svc.overview(req.auth.accountId, req.query) }),
    });

    app.get('/analytics/topics', {
      config: { scope: 'analytics:read' },
      schema: { tags, summary: 'Most frequent topics of conversations created in [from, to)', querystring: TopicsQuery, response: responses(200, TopicList) },
      handler: async (req) => ({ success: true as const, data: await svc.topics(req.auth.accountId, req.query) }),
    });
  };
