import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Deleted, IdParams, responses } from '../../http/schemas.js';
import type { AppContext } from '../../context.js';
import {
  CreateWorkflowBody,
  ListWorkflowRunsQuery,
  ListWorkflowsQuery,
  UpdateWorkflowBody,
  WorkflowList,
  WorkflowRecord,
  WorkflowRunList,
} from './workflows.schemas.js';

export const workflowsRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.workflows;
    const tags = ['Workflows'];

    app.get('/workflows', {
      config: { scope: 'workflows:read' },
      schema: { tags, summary: 'List workflows', querystring: ListWorkflowsQuery, response: responses(200, WorkflowList) },
      handler: async (req) => ({ success: true as const, data: await svc.list(req.auth.accountId, req.query) }),
    });

    app.get('/workflows/:id', {
      config: { scope: 'workflows:read' },
      schema: { tags, summary: 'Get a workflow', params: IdParams, response: responses(200, WorkflowRecord, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.get(req.auth.accountId, req.params.id) }),
    });

    app.get('/workflows/:id/runs', {
      config: { scope: 'workflows:read' },
      schema: {
        tags,
        summary: 'Runs of a workflow: the conversations that fired it and what it extracted (newest first)',
        params: IdParams,
        querystring: ListWorkflowRunsQuery,
        response: responses(200, WorkflowRunList, [404]),
      },
      handler: async (req) => ({ success: true as const, data: await svc.runs(req.auth.accountId, req.params.id, req.query) }),
    });

    app.post('/workflows', {
      config: { scope: 'workflows:write' },
      schema: { tags, summary: 'Create a workflow', body: CreateWorkflowBody, response: responses(201, WorkflowRecord) },
      handler: async (req, reply) => {
        reply.code(201);
        return { success: true as const, data: await svc.create(req.auth.accountId, req.body) };
      },
    });

    app.put('/workflows/:id', {
      config: { scope: 'workflows:write' },
      schema: {
        tags,
        summary: 'Update a workflow (merges the given fields)',
        params: IdParams,
        body: UpdateWorkflowBody,
        response: responses(200, WorkflowRecord, [404]),
      },
      handler: async (req) => ({ success: true as const, data: await svc.update(req.auth.accountId, req.params.id, req.body) }),
    });

    app.delete('/workflows/:id', {
      config: { scope: 'workflows:write' },
      schema: { tags, summary: 'Delete a workflow', params: IdParams, response: responses(200, Deleted, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.delete(req.auth.accountId, req.params.id) }),
    });
  };
