import type { Migration, MigrationProvider } from 'kysely';
import * as m0001 from './0001_foundation.js';

/** Migrations live in code (not read from disk) so the compiled CLI and the tests see the same list. */
export const migrations: Record<string, Migration> = {
  '0001_foundation': m0001,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations,
};
