import type { Migration, MigrationProvider } from 'kysely';
import * as m0001 from './0001_foundation.js';
import * as m0002 from './0002_conversation_figures.js';
import * as m0003 from './0003_webhooks.js';
import * as m0004 from './0004_workflows.js';
import * as m0005 from './0005_rundowns.js';
import * as m0006 from './0006_knowledge_versions.js';
import * as m0007 from './0007_idempotency_keys.js';
import * as m0008 from './0008_message_seq.js';
import * as m0009 from './0009_idempotency_committed.js';
import * as m0010 from './0010_deliveries_event.js';
import * as m0011 from './0011_rundown_quotes.js';
import * as m0012 from './0012_workflow_runs_list.js';
import * as m0013 from './0013_events_feed.js';
import * as m0014 from './0014_deliveries_event_webhook.js';
import * as m0015 from './0015_webhook_secret_rotation.js';
import * as m0016 from './0016_account_deletion.js';
import * as m0017 from './0017_rundown_claims.js';

/** Migrations live in code (not read from disk) so the compiled CLI and the tests see the same list. */
export const migrations: Record<string, Migration> = {
  '0001_foundation': m0001,
  '0002_conversation_figures': m0002,
  '0003_webhooks': m0003,
  '0004_workflows': m0004,
  '0005_rundowns': m0005,
  '0006_knowledge_versions': m0006,
  '0007_idempotency_keys': m0007,
  '0008_message_seq': m0008,
  '0009_idempotency_committed': m0009,
  '0010_deliveries_event': m0010,
  '0011_rundown_quotes': m0011,
  '0012_workflow_runs_list': m0012,
  '0013_events_feed': m0013,
  '0014_deliveries_event_webhook': m0014,
  '0015_webhook_secret_rotation': m0015,
  '0016_account_deletion': m0016,
  '0017_rundown_claims': m0017,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations,
};
