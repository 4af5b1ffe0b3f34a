import type { Generated } from 'kysely';

/*
 * The Kysely view of the tables created by src/db/migrations. Times are Unix milliseconds (bigint on
 * PostgreSQL, INTEGER on SQLite) so both dialects compare, index and subtract them the same way; booleans are
 * 0/1 integers and JSON is text, for the same reason.
 */

export interface AccountsTable {
  id: string;
  name: string;
  plan: 'free' | 'pro' | 'business' | 'enterprise';
  rate_limit_minute: number | null;
  rate_limit_day: number | null;
  /** JSON: the assistant persona (name, greeting, tone). */
  assistant_settings: string | null;
  created_at: number;
  /**
   * When `parley accounts delete` began deleting the account (migration 0016); null for a usable account. Once set the
   * account is unusable until its deletion, run again if it was cut short, removes the row.
   */
  deletion_started_at: number | null;
}

/**
 * The account's knowledge version is the sum of its rows' `n`: every change to documents or FAQs adds 1 to
 * one row in the same transaction, and the assistant's in-process indexes compare against the sum.
 */
export interface KnowledgeVersionsTable {
  account_id: string;
  shard: number;
  n: number;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  type: 'server' | 'public';
  /** JSON array of scope names. */
  scopes: string;
  /** sha256 hex of the secret; the secret itself is never stored. */
  hash: string;
  /** First characters of the secret, to recognise a key in listings. */
  hint: string;
  created_at: number;
  revoked_at: number | null;
}

export interface DocumentsTable {
  id: string;
  account_id: string;
  title: string;
  content: string;
  status: 'active' | 'draft';
  created_at: number;
  updated_at: number;
}

export interface FaqsTable {
  id: string;
  account_id: string;
  question: string;
  answer: string;
  category: string;
  status: 'approved' | 'pending' | 'draft';
  created_at: number;
  updated_at: number;
}

export interface ConversationsTable {
  id: string;
  account_id: string;
  customer_id: string;
  customer_label: string;
  customer_email: string | null;
  persona: string | null;
  /** JSON object. */
  metadata: string;
  status: 'active' | 'ended' | 'escalated';
  /** Set when the conversation ends: resolved, unresolved or escalated (the conversation.ended status). */
  outcome: 'resolved' | 'unresolved' | 'escalated' | null;
  escalation_reason: string | null;
  /** JSON array of strings. */
  tags: string;
  topic: string | null;
  message_count: Generated<number>;
  answered_count: Generated<number>;
  unanswered_streak: Generated<number>;
  created_at: number;
  last_message_at: number;
  escalated_at: number | null;
  ended_at: number | null;
}

export interface MessagesTable {
  id: string;
  account_id: string;
  conversation_id: string;
  role: 'customer' | 'assistant' | 'system';
  content: string;
  /** JSON array of document/FAQ ids, assistant messages only. */
  sources: string | null;
  /** The workflow whose reply this assistant message is (it cites nothing, yet answered). */
  workflow_id?: string | null;
  created_at: number;
  /** Position in the conversation (1 = the greeting): orders messages written in the same millisecond. */
  seq: number;
}

/** The transactional outbox: one row per emitted event, body bytes frozen at emit time. */
export interface EventsTable {
  id: string;
  account_id: string;
  kind: string;
  /** The exact JSON body every delivery of this event sends. */
  payload: string;
  created_at: number;
}

export interface WebhooksTable {
  id: string;
  account_id: string;
  url: string;
  /** JSON array of event kinds (aliases already resolved). */
  events: string;
  /** Kept in clear: it keys the HMAC of every delivery. Never returned by the API. */
  secret: string;
  /**
   * The secret before the last change, while WEBHOOK_SECRET_OVERLAP since `secret_changed_at` lasts (the worker's
   * sweep clears it after): attempts are signed with it too (Standard Webhooks only). Never returned by the API.
   */
  previous_secret: string | null;
  /** When `secret` last changed (Unix ms); null if never since creation. */
  secret_changed_at: number | null;
  enabled: number;
  disabled_reason: string | null;
  created_at: number;
  updated_at: number;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'cancelled';

/** One event for one webhook: URL, secret and body frozen when the event was emitted. */
export interface DeliveriesTable {
  id: string;
  account_id: string;
  webhook_id: string;
  event_id: string | null;
  event: string;
  url: string;
  secret: string;
  body: string;
  status: DeliveryStatus;
  /** Attempts recorded so far, automatic and manual (numbers the next attempt). */
  attempt_count: number;
  /** Automatic attempts made: what the retry schedule and the disable rule count. */
  auto_attempts: number;
  next_attempt_at: number | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface DeliveryAttemptsTable {
  delivery_id: string;
  attempt: number;
  kind: 'auto' | 'manual' | 'test';
  at: number;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  /** First 4 KiB of the receiver's answer. */
  response_body: string | null;
  /** Lease owner that made the attempt (which process). */
  worker: string;
}

export interface WorkflowsTable {
  id: string;
  account_id: string;
  slug: string;
  name: string;
  /** JSON array of trigger phrases. */
  triggers: string;
  /** JSON array of `{key, type, pattern?}`. */
  fields: string;
  reply: string | null;
  enabled: number;
  created_at: number;
  updated_at: number;
}

export interface WorkflowRunsTable {
  workflow_id: string;
  conversation_id: string;
  account_id: string;
  /** JSON object: the fields found in the conversation when the workflow fired. */
  extracted: string;
  created_at: number;
}

/** A digest of [from_ts, to_ts) for one account (src/modules/rundowns). */
export interface RundownsTable {
  id: string;
  account_id: string;
  trigger: 'schedule' | 'manual';
  from_ts: number;
  to_ts: number;
  /** JSON object: the headline figures (what rundown.generated carries). */
  figures: string;
  /** JSON object: topTopics, unanswered and suggestedFaqs. */
  body: string;
  created_at: number;
}

/**
 * One customer message behind an unanswered group of a rundown (`position`: its index in `unanswered`), recorded when
 * the rundown was made so that erasing the conversation can reword the rundown (src/modules/rundowns).
 */
export interface RundownQuotesTable {
  account_id: string;
  rundown_id: string;
  position: number;
  message_id: string;
  conversation_id: string;
}

/**
 * A worker building the scheduled rundown of one window of one account (migration 0017): the others pass the window by
 * until `expires_at` (Unix ms); deleted by the transaction that stores the rundown.
 */
export interface RundownClaimsTable {
  account_id: string;
  from_ts: number;
  to_ts: number;
  /** Which run took it: only that run releases it after a failure. */
  holder: string;
  expires_at: number;
}

/** A key sent with a POST (src/http/idempotency.ts); `status_code` is null while the first request runs. */
export interface IdempotencyKeysTable {
  account_id: string;
  key: string;
  /** sha256 of method, path and body: a retry must be the same request. */
  fingerprint: string;
  method: string;
  path: string;
  status_code: number | null;
  /** The answer's body, replayed byte for byte. */
  response: string | null;
  created_at: number;
  /** When the request now running took the key; a claim older than the lease is left over from a crash. */
  locked_at: number;
  /** When that request's first write committed (set in the write's transaction); null while nothing was written. */
  committed_at: number | null;
}

export interface DB {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  documents: DocumentsTable;
  faqs: FaqsTable;
  conversations: ConversationsTable;
  messages: MessagesTable;
  events: EventsTable;
  webhooks: WebhooksTable;
  deliveries: DeliveriesTable;
  delivery_attempts: DeliveryAttemptsTable;
  workflows: WorkflowsTable;
  workflow_runs: WorkflowRunsTable;
  rundowns: RundownsTable;
  rundown_quotes: RundownQuotesTable;
  rundown_claims: RundownClaimsTable;
  knowledge_versions: KnowledgeVersionsTable;
  idempotency_keys: IdempotencyKeysTable;
}
