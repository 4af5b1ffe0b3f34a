import type { Migration, MigrationProvider } from 'kysely';
import * as m0001 from './0001_foundation.js';
import * as m0002 from './0002_webhooks.js';

/** Migrations live in code (not read from disk) so the compiled CLI and the tests see the same list. */
export const migrations: Record<string, Migration> = {
  '0001_foundation': m0001,
  '0002_webhooks': m0002,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations,
};
