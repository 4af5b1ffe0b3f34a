import { Type, type Static } from 'typebox';
import { PageQuery, StringEnum, Timestamp } from '../../http/schemas.js';

export const DOCUMENT_STATUSES = ['active', 'draft'] as const;

const Title = Type.String({ minLength: 1, maxLength: 1_000 });
const Content = Type.String({ minLength: 1, maxLength: 500_000 });
const Status = StringEnum(DOCUMENT_STATUSES);

export const CreateDocumentBody = Type.Object(
  { title: Title, content: Content, status: Type.Optional(Status) },
  { additionalProperties: false },
);
export type CreateDocumentBody = Static<typeof CreateDocumentBody>;

export const UpdateDocumentBody = Type.Object(
  { title: Type.Optional(Title), content: Type.Optional(Content), status: Type.Optional(Status) },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateDocumentBody = Static<typeof UpdateDocumentBody>;

export const ListDocumentsQuery = Type.Object(
  { status: Type.Optional(StringEnum([...DOCUMENT_STATUSES, 'all'] as const, { default: 'all' })), ...PageQuery },
  { additionalProperties: false },
);
export type ListDocumentsQuery = Static<typeof ListDocumentsQuery>;

export const DocumentRecord = Type.Object({
  id: Type.String(),
  title: Type.String(),
  content: Type.String(),
  status: Status,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

/** List items and the create answer omit content (spec "Document"). */
export const DocumentListItem = Type.Omit(DocumentRecord, ['content']);
export const CreatedDocument = Type.Omit(DocumentRecord, ['content', 'updatedAt']);

export const DocumentList = Type.Object({
  documents: Type.Array(DocumentListItem),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});
