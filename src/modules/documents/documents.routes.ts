import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Deleted, IdParams, responses } from '../../http/schemas.js';
import type { AppContext } from '../../context.js';
import { keptReads } from '../../http/versioned-answers.js';
import {
  CreateDocumentBody,
  CreatedDocument,
  DocumentList,
  DocumentRecord,
  ListDocumentsQuery,
  UpdateDocumentBody,
} from './documents.schemas.js';

export const documentsRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.documents;
    const tags = ['Documents'];
    // The reads' serialised answers, per app (each process or node its own), kept against the account's knowledge
    // version: reading the version costs a fraction of the page's two statements, its 100 values and their
    // serialisation (bench/http/RESULTS.md). Every document write bumps the version in its own transaction.
    const versioned = keptReads((accountId) => svc.knowledgeVersion(accountId));

    app.get('/documents', {
      config: { scope: 'documents:read' },
      schema: { tags, summary: 'List documents', querystring: ListDocumentsQuery, response: responses(200, DocumentList) },
      handler: (req, reply) => {
        const q = req.query;
        return versioned(req.auth.accountId, `list\0${q.status ?? 'all'}\0${q.limit}\0${q.offset}`, reply, () => svc.list(req.auth.accountId, q));
      },
    });

    app.get('/documents/:id', {
      config: { scope: 'documents:read' },
      schema: { tags, summary: 'Get a document', params: IdParams, response: responses(200, DocumentRecord, [404]) },
      handler: (req, reply) => versioned(req.auth.accountId, `get\0${req.params.id}`, reply, () => svc.get(req.auth.accountId, req.params.id)),
    });

    app.post('/documents', {
      config: { scope: 'documents:write' },
      schema: { tags, summary: 'Create a document', body: CreateDocumentBody, response: responses(201, CreatedDocument) },
      handler: async (req, reply) => {
        reply.code(201);
        return { success: true as const, data: await svc.create(req.auth.accountId, req.body) };
      },
    });

    app.put('/documents/:id', {
      config: { scope: 'documents:write' },
      schema: {
        tags,
        summary: 'Update a document (merges the given fields)',
        params: IdParams,
        body: UpdateDocumentBody,
        response: responses(200, DocumentRecord, [404]),
      },
      handler: async (req) => ({ success: true as const, data: await svc.update(req.auth.accountId, req.params.id, req.body) }),
    });

    app.delete('/documents/:id', {
      config: { scope: 'documents:write' },
      schema: { tags, summary: 'Delete a document', params: IdParams, response: responses(200, Deleted, [404]) },
      handler: async (req) => ({ success: true as const, data: await svc.delete(req.auth.accountId, req.params.id) }),
    });
  };
