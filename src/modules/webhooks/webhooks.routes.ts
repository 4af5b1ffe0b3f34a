import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { Deleted, IdParams, responses } from '../../http/schemas.js';
import {
  CreateWebhookBody,
  DeliveryDetail,
  DeliveryList,
  DeliveryParams,
  ListDeliveriesQuery,
  ListWebhooksQuery,
  RecoverResult,
  RecoverWebhookBody,
  TestWebhookBody,
  UpdateWebhookBody,
  WebhookList,
  WebhookRecord,
} from './webhooks.schemas.js';

export const webhooksRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.webhooks;
    const tags = ['Webhooks'];
    const read = { scope: 'webhooks:read' as const };
    const write = { scope: 'webhooks:write' as const };

    app.get('/webhooks', {
      config: read,
      schema: { tags, summary: 'List webhooks (newest first)', querystring: ListWebhooksQuery, response: responses(200, WebhookList) },
      handler: async (req) => ({ success: true as const, data: await svc.list(req.auth.accountId, req.query) }),
    });

    app.post('/webhooks', {
      config: write,
      schema: { tags, summary: 'Register a webhook', body: CreateWebhookBody, response: responses(201, WebhookRecord) },
      handler: async (req, reply) => {
        reply.code(201);
        return { success: true as const, data: await svc.create(req.auth.accountId, req.body) };
      },
    });

    app.get('/webhooks/:id', {
      config: read,
      schema: { tags, summary: 'Get a webhook', params: IdParams, response: responses(200, WebhookRecord, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.get(req.auth.accountId, req.params.id) }),
    });

    app.put('/webhooks/:id', {
      config: write,
      schema: {
        tags,
        summary: 'Update a webhook (merges url, events, secret, enabled; new settings apply to future events)',
        params: IdParams,
        body: UpdateWebhookBody,
        response: responses(200, WebhookRecord, [404]),
      },
      handler: async (req) => ({ success: true as const, data: await svc.update(req.auth.accountId, req.params.id, req.body) }),
    });

    app.delete('/webhooks/:id', {
      config: write,
      schema: { tags, summary: 'Delete a webhook (cancels its pending deliveries)', params: IdParams, response: responses(200, Deleted, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.delete(req.auth.accountId, req.params.id) }),
    });

    app.post('/webhooks/:id/test', {
      config: write,
      schema: {
        tags,
        summary: 'Send a test event to the webhook now and answer the delivery',
        params: IdParams,
        body: TestWebhookBody,
        response: responses(200, DeliveryDetail, [404]),
      },
      // A bodiless POST counts as {} (registerOptionalBody: every field of the body is optional).
      handler: async (req) => ({ success: true as const, data: await svc.test(req.auth.accountId, req.params.id, req.body.message) }),
    });

    app.post('/webhooks/:id/recover', {
      config: write,
      schema: {
        tags,
        summary: 'Send again every event of a period the webhook missed (after an outage): new deliveries, sent by the worker',
        params: IdParams,
        body: RecoverWebhookBody,
        response: responses(202, RecoverResult, [404]),
      },
      // 202: the deliveries exist when this answers (the count is exact and survives a restart); their sending has
      // not happened yet, as with any new delivery.
      handler: async (req, reply) => {
        reply.code(202);
        return { success: true as const, data: await svc.recover(req.auth.accountId, req.params.id, req.body) };
      },
    });

    app.get('/webhooks/:id/deliveries', {
      config: read,
      schema: {
        tags,
        summary: 'Delivery history of a webhook (newest first)',
        params: IdParams,
        querystring: ListDeliveriesQuery,
        response: responses(200, DeliveryList, [404]),
      },
      handler: async (req) => ({ success: true as const, data: await svc.listDeliveries(req.auth.accountId, req.params.id, req.query) }),
    });

    app.get('/webhooks/:id/deliveries/:deliveryId', {
      config: read,
      schema: {
        tags,
        summary: 'One delivery with its body and the response bodies of its attempts',
        params: DeliveryParams,
        response: responses(200, DeliveryDetail, [404]),
      },
      handler: async (req) => ({
        success: true as const,
        data: await svc.getDelivery(req.auth.accountId, req.params.id, req.params.deliveryId),
      }),
    });

    app.post('/webhooks/:id/deliveries/:deliveryId/retry', {
      config: write,
      schema: {
        tags,
        summary: 'Make a fresh attempt of a delivery now (recorded as a manual attempt)',
        params: DeliveryParams,
        response: responses(200, DeliveryDetail, [404]),
      },
      handler: async (req) => ({
        success: true as const,
        data: await svc.retry(req.auth.accountId, req.params.id, req.params.deliveryId),
      }),
    });
  };
