import {
  expressionBuilder,
  PostgresAdapter,
  sql,
  type AliasedRawBuilder,
  type Expression,
  type InsertQueryBuilder,
  type InsertResult,
  type Kysely,
  type QueryCreator,
  type SelectQueryBuilder,
  type SqlBool,
  type Transaction,
  type UpdateQueryBuilder,
} from 'kysely';
import { insertOnlyWith, onlyWithRows } from '../../db/only-with.js';
import { precompileShapes } from '../../db/precompiled.js';
import type { DB, WebhooksTable } from '../../db/schema.js';
import { toIso } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';

/** What a webhook may subscribe to: the seed's kinds except `test` (sent only by the test action). */
export const SUBSCRIBABLE_EVENTS = [
  'conversation.started',
  'conversation.ended',
  'conversation.message',
  'conversation.erased',
  'escalation',
  'escalation.submitted',
  'workflow.triggered',
  'rundown.generated',
] as const;
export type SubscribableEvent = (typeof SUBSCRIBABLE_EVENTS)[number];

export const EVENT_KINDS = [...SUBSCRIBABLE_EVENTS, 'test'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

type Conn = Kysely<DB> | Transaction<DB>;

export interface EmittedEvent {
  id: string;
  kind: EventKind;
  /** The exact body bytes every delivery of this event sends. */
  body: string;
  createdAt: number;
}

/** An enabled webhook of the account, as the fan-out needs it (`events`: the JSON list of kinds it subscribes to). */
export type Subscriber = Pick<WebhooksTable, 'id' | 'url' | 'secret' | 'events'>;

/** Turns events into webhook deliveries, inside the emitting transaction. */
export interface EventFanout {
  /** The account's enabled webhooks, as a query: on PostgreSQL the statement that inserts the events reads them. */
  subscribers(db: QueryCreator<DB>, accountId: string): SelectQueryBuilder<DB, 'webhooks', Subscriber>;
  /** Creates the deliveries of events just emitted together (in order) for those webhooks. */
  deliver(conn: Conn, accountId: string, events: readonly EmittedEvent[], subscribers: readonly Subscriber[]): Promise<void>;
  /**
   * PostgreSQL, as part of the statement that inserts the events: the insert of their deliveries, the rows `deliver`
   * would write, made in SQL from the account's webhooks as that statement sees them. `emitted` names the statement's
   * WITH query that inserted the events (returning `id`, `kind`, `payload`, `created_at`); `ids` must hold an id for
   * every delivery it can write; `now` is when they are created. Not run: the statement is precompiled, so
   * `accountId`, `ids` and `now` must be used only as bound values.
   */
  deliverWith(db: QueryCreator<DB>, accountId: string, emitted: string, ids: readonly string[], now: number): InsertQueryBuilder<DB, 'deliveries', InsertResult>;
  /** Once a statement with deliverWith has written deliveries (it commits by itself): the worker is told. */
  delivered(): void;
}

/**
 * The change emitAlone writes with the events, and the insert that goes with it, as parts of a statement compiled
 * once per shape (db/precompiled.ts precompileShapes): each is built from `args`, which it may use only as bound
 * values, and `shape` must name every other choice the two make.
 */
export interface AloneChange<A extends Record<string, unknown>, U extends keyof DB, T extends keyof DB> {
  shape: string;
  args: A;
  /**
   * The write of the row the events tell of: an UPDATE of it, or the INSERT of a new one (insertRowsWhere). It must
   * write nothing where `guard` does not hold (when there is one: emitAlone's count of the account's webhooks).
   */
  change(db: QueryCreator<DB>, args: A, guard: Expression<SqlBool> | undefined): UpdateQueryBuilder<DB, U, U, unknown> | InsertQueryBuilder<DB, U, InsertResult>;
  /** Given the name of the change's WITH query: must write nothing unless it answers a row. */
  alongside(db: QueryCreator<DB>, onlyWith: string, args: A): InsertQueryBuilder<DB, T, InsertResult>;
}
type AnyAloneChange = AloneChange<Record<string, unknown>, keyof DB, keyof DB>;
/**
 * What the statement asks of a change's write, an UPDATE or an INSERT alike: a row for each row it wrote. (The two
 * builders' `returning` overloads differ, so it cannot be called on their union as such.)
 */
interface AloneWrite {
  returning(selections: ReadonlyArray<AliasedRawBuilder<number, 'changed'>>): UpdateQueryBuilder<DB, keyof DB, keyof DB, Record<string, unknown>> | InsertQueryBuilder<DB, keyof DB, Record<string, unknown>>;
}

/** The columns of an event's row, in the order of its JSON (prepare). */
const EVENT_COLUMNS = ['id', 'account_id', 'kind', 'payload', 'created_at'] as const;

/**
 * emitAlone's statement, compiled once per shape of the change and whether it writes deliveries: a chat message's
 * whole write on PostgreSQL, whose building (Kysely's node trees, freezing and compiling some fifty nodes) cost
 * more service CPU than anything else of the message's but the socket writes. `f`'s deliveries are first due a
 * fixed delay after their event, bound as it was when compiled: a fan-out set since makes a new one (setFanout).
 */
function aloneStatement(f: EventFanout | undefined) {
  return precompileShapes(
    (s: { part: AnyAloneChange; delivering: boolean }) => `${s.delivering ? 'deliveries' : 'no deliveries'} ${s.part.shape}`,
    (
      db,
      { part, delivering },
      a: { part: Record<string, unknown>; events: string; accountId?: string; webhooks?: number; ids?: string[]; now?: number },
    ) => {
      // The webhooks are counted by the change's condition, in the statement's snapshot, which the deliveries' insert
      // reads too: more enabled since the caller's read make the statement write nothing, and the caller's
      // transaction delivers to them all.
      const guarded = (q: QueryCreator<DB>) => {
        const eb = expressionBuilder<DB, never>();
        const guard = f ? eb(eb.selectFrom(f.subscribers(q, a.accountId!).as('s')).select((e) => e.fn.countAll().as('n')), '<=', a.webhooks!) : undefined;
        const write: AloneWrite = part.change(q, a.part, guard);
        return write.returning([sql<number>`1`.as('changed')]);
      };
      const withChange = db.with('changed', guarded) as unknown as QueryCreator<DB>;
      const withAlongside = withChange.with('alongside', (q) => part.alongside(q, 'changed', a.part)) as unknown as QueryCreator<DB>;
      const withEvents = withAlongside.with('emitted', (q) => {
        const insert = insertOnlyWith(q, 'events', EVENT_COLUMNS, a.events, 'changed');
        return delivering ? insert.returning(['id', 'kind', 'payload', 'created_at']) : insert;
      }) as unknown as QueryCreator<DB>;
      let deliveries = sql<number>`0`;
      let all = withEvents;
      if (delivering) {
        all = withEvents.with('delivered', (q) => f!.deliverWith(q, a.accountId!, 'emitted', a.ids!, a.now!).returning(sql<number>`1`.as('one'))) as unknown as QueryCreator<DB>;
        deliveries = sql<number>`(select count(*) from delivered)`;
      }
      return all.selectNoFrom([sql<boolean>`exists (select 1 from changed)`.as('written'), deliveries.as('deliveries')]);
    },
  );
}

/**
 * The transactional outbox: emit() must be called with the transaction of the change that caused the event,
 * so the event (and its deliveries) exist if and only if that change committed.
 */
export function createEventBus(opts: { now: () => number; fanout?: EventFanout }) {
  let fanout = opts.fanout;
  let alone = aloneStatement(fanout);
  /** The events (each with the body its deliveries send) and their rows. */
  function prepare(accountId: string, items: ReadonlyArray<{ kind: EventKind; data: Record<string, unknown> }>) {
    const createdAt = opts.now();
    const emitted: EmittedEvent[] = items.map(({ kind, data }) => ({
      id: newId('evt', createdAt),
      kind,
      body: JSON.stringify({ event: kind, timestamp: toIso(createdAt), data }),
      createdAt,
    }));
    const rows = emitted.map((e) => ({ id: e.id, account_id: accountId, kind: e.kind, payload: e.body, created_at: createdAt }));
    return { emitted, rows, createdAt };
  }
  /**
   * Several events of one account at once, in order: one insert for the events and one fan-out for their
   * deliveries, instead of a round trip pair per event (a chat exchange emits two messages at a time).
   */
  async function emitMany<T extends keyof DB>(
    conn: Conn,
    accountId: string,
    items: ReadonlyArray<{ kind: EventKind; data: Record<string, unknown> }>,
    /**
     * The change the events tell of, when it is an insert: on PostgreSQL it is written by the same statement as the
     * events, a round trip fewer inside the caller's transaction; on SQLite just before them.
     */
    alongside?: (db: QueryCreator<DB>) => InsertQueryBuilder<DB, T, InsertResult>,
  ): Promise<EmittedEvent[]> {
    if (items.length === 0) {
      if (alongside) await alongside(conn).execute();
      return [];
    }
    const { emitted, rows } = prepare(accountId, items);
    let subscribers: Subscriber[] | undefined;
    if (conn.getExecutor().adapter instanceof PostgresAdapter) {
      // One statement: the change, the events and the read of the webhooks to deliver them to (data-modifying WITHs
      // run once and in full whether or not the main query reads them; the read sees the statement's snapshot, as
      // a SELECT of its own would).
      const withChange = (alongside ? conn.with('alongside', alongside) : conn) as QueryCreator<DB>;
      const all = withChange.with('emitted', (db) => db.insertInto('events').values(rows)) as unknown as QueryCreator<DB>;
      if (fanout) subscribers = await fanout.subscribers(all, accountId).execute();
      else await all.selectNoFrom((eb) => eb.lit(1).as('done')).execute();
    } else {
      if (alongside) await alongside(conn).execute();
      await conn.insertInto('events').values(rows).execute();
      if (fanout) subscribers = await fanout.subscribers(conn, accountId).execute();
    }
    if (fanout && subscribers) await fanout.deliver(conn, accountId, emitted, subscribers);
    return emitted;
  }
  /**
   * PostgreSQL, outside any transaction: `part`'s change (an UPDATE or INSERT of the row the events tell of), the insert
   * alongside it, the events and their webhook deliveries, as one statement — atomic on its own, so without the BEGIN
   * and COMMIT round trips of a transaction. Written only if the change writes its row and the account has at most
   * `webhooks` enabled webhooks (what the caller read): the deliveries' ids are made here, one per event and webhook,
   * so one enabled since would lack one. Answers the events, or undefined when nothing was written (the caller then
   * writes the change in a transaction).
   */
  async function emitAlone<A extends Record<string, unknown>, U extends keyof DB, T extends keyof DB>(
    db: Kysely<DB>,
    accountId: string,
    items: ReadonlyArray<{ kind: EventKind; data: Record<string, unknown> }>,
    webhooks: number,
    part: AloneChange<A, U, T>,
  ): Promise<EmittedEvent[] | undefined> {
    const { emitted, rows, createdAt } = prepare(accountId, items);
    const f = fanout;
    const delivering = f !== undefined && webhooks > 0;
    // Only what the shape binds: an argument the statement does not use is refused as one that shapes it.
    const args = {
      part: part.args,
      events: onlyWithRows<'events'>(rows).json,
      ...(f ? { accountId, webhooks } : {}),
      ...(delivering ? { ids: Array.from({ length: emitted.length * webhooks }, () => newId('dlv', createdAt)), now: opts.now() } : {}),
    };
    const written = (await alone(db, { part: part as unknown as AnyAloneChange, delivering }, args)).rows[0]!;
    if (!written.written) return undefined;
    if (Number(written.deliveries) > 0) f?.delivered();
    return emitted;
  }
  return {
    setFanout(f: EventFanout) {
      fanout = f;
      alone = aloneStatement(f);
    },
    async emit(conn: Conn, accountId: string, kind: EventKind, data: Record<string, unknown>): Promise<EmittedEvent> {
      return (await emitMany(conn, accountId, [{ kind, data }]))[0]!;
    },
    emitMany,
    emitAlone,
  };
}

export type EventBus = ReturnType<typeof createEventBus>;
