import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import type { Logger } from '../lib/log.js';
import type { DB } from './schema.js';

/**
 * A dedicated PostgreSQL connection that LISTENs on one channel and calls `onNotify` for every notification.
 * Notifications are sent after the changes they announce have committed (createAnnouncer), so a worker woken this
 * way finds the committed rows.
 * When the connection drops it is re-opened after a second; callers keep polling meanwhile, and `onNotify` is
 * called once after every (re)connect so nothing committed while deaf waits for the next poll.
 */
export function listen(url: string, channel: string, onNotify: () => void, log: Logger): { close(): Promise<void> } {
  if (!/^\w{1,63}$/.test(channel)) throw new Error(`invalid notification channel ${JSON.stringify(channel)}`);
  let client: pg.Client | null = null;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;

  const drop = (c: pg.Client) => {
    if (client === c) client = null;
    c.removeAllListeners('end');
    c.removeAllListeners('error');
    c.on('error', () => undefined);
    c.end().catch(() => undefined);
    if (!closed && !timer) {
      timer = setTimeout(() => {
        timer = undefined;
        void connect();
      }, 1_000);
      timer.unref();
    }
  };

  const connect = async () => {
    if (closed) return;
    const c = new pg.Client({ connectionString: url });
    c.on('notification', (n) => {
      if (n.channel === channel) onNotify();
    });
    c.on('error', (err) => {
      log.warn({ err, channel }, 'notification connection lost; polling until it is back');
      drop(c);
    });
    c.on('end', () => drop(c));
    try {
      await c.connect();
      await c.query(`LISTEN "${channel}"`);
      if (closed) return drop(c);
      client = c;
      onNotify();
    } catch (err) {
      log.warn({ err, channel }, 'could not listen for notifications; polling until it works');
      drop(c);
    }
  };
  void connect();

  return {
    async close() {
      closed = true;
      clearTimeout(timer);
      const c = client;
      client = null;
      if (c) {
        c.removeAllListeners('end');
        await c.end().catch(() => undefined);
      }
    },
  };
}

/** The channel new webhook deliveries are announced on; one per schema, so deployments side by side stay apart. */
export function deliveriesChannel(schema: string | undefined): string {
  return `parley_deliveries_${schema ?? 'public'}`.slice(0, 63);
}

/**
 * Announces on `channel` that something committed: NOTIFY in a statement of its own, after the commit, never inside
 * the transaction that made the change. PostgreSQL takes one cluster-wide lock for the commit of every transaction
 * that ran NOTIFY and holds it through the commit's WAL flush, so NOTIFY inside the API's write transactions made
 * them commit one at a time, without sharing flushes (bench/postgres/notify-commits.mjs, 50 clients: 1,329
 * commits/s with a NOTIFY in each transaction, 3,142 without). A NOTIFY on its own has no change to flush: it took
 * 0.35 ms here, against 0.29 for SELECT 1 and 0.58 for a one-row INSERT.
 *
 * Coalesced: one NOTIFY in flight at a time, announcements made meanwhile answered by one more after it, at most one
 * per `minIntervalMs`; a listener only needs to know there is something to look for. A NOTIFY that fails is not
 * retried: listeners also poll.
 */
export function createAnnouncer(db: Kysely<DB>, channel: string, opts: { minIntervalMs?: number } = {}): () => void {
  const minIntervalMs = opts.minIntervalMs ?? 5;
  const notify = sql`select pg_notify(${channel}, '')`;
  let busy = false;
  let again = false;
  let lastAt = 0;
  const send = () => {
    busy = true;
    again = false;
    lastAt = Date.now();
    notify
      .execute(db)
      .catch(() => undefined)
      .finally(() => {
        if (!again) {
          busy = false;
          return;
        }
        setTimeout(send, Math.max(0, lastAt + minIntervalMs - Date.now())).unref();
      });
  };
  return () => {
    if (busy) again = true;
    else send();
  };
}
