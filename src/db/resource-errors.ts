/**
 * Failures of the database itself rather than of one request: it cannot store more (a full disk, SQLite's
 * SQLITE_FULL, PostgreSQL's disk_full), it ran out of memory, it takes no more connections, or it is shutting down
 * or starting up. Nothing the request did is at fault, so the client is told to come back later (the same request
 * will work once the database has recovered), and the operator is told which of these it is, since each needs its
 * own remedy. The transaction that met one is rolled back whole: SQLite undoes the whole transaction on SQLITE_FULL
 * and SQLITE_NOMEM, not only the statement (database.ts, group-commit.ts), and PostgreSQL aborts it.
 */
export type ResourceProblem = 'full' | 'out-of-memory' | 'too-many-connections' | 'insufficient-resources' | 'unavailable' | 'busy';

export interface ResourceError {
  problem: ResourceProblem;
  /** The database's own code for it (SQLITE_FULL, 53100, …). */
  code: string;
  /** What a client is asked to wait (Retry-After, seconds). */
  retryAfterSeconds: number;
  /** The log line: what happened and what the operator does about it. */
  operatorMessage: string;
}

/**
 * A full database stays full until someone frees space: retrying sooner than this only repeats the refusal. Memory,
 * connections and a restart clear by themselves within seconds.
 */
const FULL_RETRY_AFTER_S = 30;
const TRANSIENT_RETRY_AFTER_S = 5;

const PROBLEMS: Record<string, ResourceProblem> = {
  SQLITE_FULL: 'full',
  SQLITE_NOMEM: 'out-of-memory',
  SQLITE_IOERR_NOMEM: 'out-of-memory',
  // SQLSTATE class 53, insufficient_resources
  '53000': 'insufficient-resources',
  '53100': 'full',
  '53200': 'out-of-memory',
  '53300': 'too-many-connections',
  '53400': 'insufficient-resources',
  // admin_shutdown, crash_shutdown, cannot_connect_now (starting up, shutting down, in recovery)
  '57P01': 'unavailable',
  '57P02': 'unavailable',
  '57P03': 'unavailable',
  // The server cannot be reached: connection refused, or SQLSTATE class 08 (connection exception) from the driver.
  ECONNREFUSED: 'unavailable',
  '08000': 'unavailable',
  '08001': 'unavailable',
  '08003': 'unavailable',
  '08004': 'unavailable',
  '08006': 'unavailable',
  // Another process held SQLite's write lock past the busy timeout (a backup, a CLI command, a node on the same file).
  SQLITE_BUSY: 'busy',
};

const OPERATOR_MESSAGES: Record<ResourceProblem, string> = {
  full: 'the database is full (no space left for it): writes are refused until space is freed (disk, or the volume or quota it sits on); the service recovers by itself once there is room, no restart needed',
  'out-of-memory': 'the database ran out of memory: the request was refused; check the database server (or, on SQLite, this process) for memory pressure',
  'too-many-connections': "the database refused a connection: it has no slot left (max_connections, or the role's or the database's connection limit); lower the nodes' pool sizes or raise the server's limit",
  'insufficient-resources': 'the database lacks a resource (a configuration limit such as max_locks_per_transaction): the request was refused; see the database server\'s log',
  unavailable: 'the database is shutting down, restarting, not yet accepting connections or cannot be reached: requests fail until it is back',
  busy: 'the SQLite database stayed locked by another process past the busy timeout (a backup, a parley command, another process on the same file): the request was refused; if it persists, look for a process holding the database',
};

/** What kind of resource failure `err` is, or null for any other error. */
export function resourceError(err: unknown): ResourceError | null {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return null;
  // Class 53 codes PostgreSQL may add later are resources too.
  const problem = PROBLEMS[code] ?? (/^53[0-9A-Z]{3}$/.test(code) ? 'insufficient-resources' : undefined);
  if (!problem) return null;
  return {
    problem,
    code,
    retryAfterSeconds: problem === 'full' ? FULL_RETRY_AFTER_S : TRANSIENT_RETRY_AFTER_S,
    operatorMessage: `${OPERATOR_MESSAGES[problem]} (${code})`,
  };
}
