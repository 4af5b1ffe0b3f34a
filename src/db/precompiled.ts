import {
  AliasNode,
  ColumnNode,
  IdentifierNode,
  ReferenceNode,
  SelectQueryNode,
  SqliteAdapter,
  type Compilable,
  type CompiledQuery,
  type Kysely,
  type OperationNode,
  type QueryResult,
  type Transaction,
} from 'kysely';
import type { DB } from './schema.js';

type Conn = Kysely<DB> | Transaction<DB>;

/**
 * Stands in for a parameter while the query is built once; every occurrence must end up as a bound value. `path`
 * leads to its value in the arguments of a call (an index, then field names within records).
 */
class Slot {
  constructor(readonly path: ReadonlyArray<string | number>) {}
  read(args: unknown): unknown {
    let v = args;
    for (const k of this.path) v = (v as Record<string | number, unknown>)[k];
    return v;
  }
}

interface Template<O> {
  compiled: CompiledQuery<O>;
  /** Per bound parameter: the slot it comes from, or a constant fixed at build time. */
  params: Array<Slot | { constant: unknown }>;
  sqlite: boolean;
}

/**
 * The statement cache in database.ts prepares a SQL text that starts with this in better-sqlite3's raw mode:
 * its rows come back as arrays, in the order of the select list (precompileRows).
 */
export const ROWS_AS_ARRAYS = '/* rows as arrays */ ';

/**
 * A synchronous read on a SQLite handle (database.ts registers one per database it opens): the rows, or null
 * when it cannot run now because a transaction is open on the single connection, and the read must then wait
 * for it through Kysely like any other query.
 */
export type DirectRead = (sql: string, parameters: readonly unknown[]) => unknown[] | null;
const directReads = new WeakMap<object, DirectRead>();

/** Lets precompileRows read `db`'s rows straight from its SQLite handle when no transaction holds it. */
export function registerDirectReads(db: Kysely<DB>, read: DirectRead) {
  directReads.set(db, read);
}

/**
 * Compiles `build` once per dialect (keyed by the dialect's adapter: a Kysely instance and its transactions share
 * it), given `slots` in place of its arguments.
 */
function templates<O>(slots: readonly Slot[], build: (db: Kysely<DB>) => Compilable<O>, check: (compiled: CompiledQuery<O>) => void = () => {}) {
  const byAdapter = new WeakMap<object, Template<O>>();
  return function template(db: Conn): Template<O> {
    const adapter = db.getExecutor().adapter;
    let t = byAdapter.get(adapter);
    if (t) return t;
    const compiled = build(db as Kysely<DB>).compile();
    const seen = new Set<Slot>();
    const params = compiled.parameters.map((p) => {
      if (p instanceof Slot) {
        seen.add(p);
        return p;
      }
      return { constant: p };
    });
    if (seen.size !== slots.length || compiled.sql.includes('[object')) {
      throw new Error(`precompile: every argument must be a bound value of the query (${compiled.sql})`);
    }
    check(compiled);
    t = { compiled, params, sqlite: adapter instanceof SqliteAdapter };
    byAdapter.set(adapter, t);
    return t;
  };
}

const bind = (t: Template<unknown>, args: unknown) => t.params.map((p) => (p instanceof Slot ? p.read(args) : p.constant));

/** A slot per argument of `build` (its parameters after the database). */
const positional = (build: { length: number }) => Array.from({ length: build.length - 1 }, (_, i) => new Slot([i]));

/**
 * A query built and compiled once per dialect, then executed with fresh parameter values: on the hot routes
 * Kysely's per-request building (node trees, freezing, the compiler's visitor) cost more than SQLite's own
 * work on a primary-key lookup (bench/http/RESULTS.md). The SQL text is exactly what the builder produces
 * for that dialect; only the bound values change.
 *
 * `build` must use each argument only as a bound value (in a `where`, `values`, `limit`…), never to choose
 * the query's shape (branch on it, pass it to `sql.raw`, size an `in` list): shape choices need one
 * precompiled query per shape. A misuse is refused the first time the query is compiled.
 */
export function precompile<A extends unknown[], O>(build: (db: Kysely<DB>, ...args: A) => Compilable<O>) {
  const slots = positional(build);
  const template = templates(slots, (db) => build(db, ...(slots as unknown as A)));
  return async function execute(db: Conn, ...args: A): Promise<QueryResult<O>> {
    const t = template(db);
    return db.executeQuery<O>({ ...t.compiled, parameters: bind(t, args) });
  };
}

/** Plain objects are records of arguments; anything else (an array too) is one bound value. */
const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);

/** `args` with a slot in place of each bound value (records walked), and the slots. */
function slotsOf<A extends Record<string, unknown>>(args: A) {
  const slots: Slot[] = [];
  const walk = (v: Record<string, unknown>, path: string[]): Record<string, unknown> =>
    Object.fromEntries(
      Object.entries(v).map(([k, x]) => {
        if (isRecord(x)) return [k, walk(x, [...path, k])];
        const slot = new Slot([...path, k]);
        slots.push(slot);
        return [k, slot];
      }),
    );
  return { stand: walk(args, []) as A, slots };
}

/**
 * Past this many shapes a key is taken to hold a value rather than name a shape (each would compile, and stay,
 * for as long as the process runs).
 */
const MAX_SHAPES = 64;

/**
 * precompile for a query whose shape varies with a few choices (a condition `is null` or `= $n`, an optional part
 * of the statement): one template per shape, compiled the first time that shape is executed. `shape` holds the
 * choices, and `key(shape)` must name every one `build` makes from it: two calls with the same key run the same
 * SQL, built from the first call's shape. `args` is a record of the bound values (records within it walked, so
 * a row can be passed whole); as with precompile, `build` must use every one of them, and only as a bound value.
 * Which fields `args` has may depend on the shape (a value bound only in some shapes), never on anything else.
 */
export function precompileShapes<S, A extends Record<string, unknown>, O>(key: (shape: S) => string, build: (db: Kysely<DB>, shape: S, args: A) => Compilable<O>) {
  const byKey = new Map<string, (db: Conn) => Template<O>>();
  return async function execute(db: Conn, shape: S, args: A): Promise<QueryResult<O>> {
    const k = key(shape);
    let template = byKey.get(k);
    if (!template) {
      if (byKey.size >= MAX_SHAPES) throw new Error(`precompileShapes: more than ${MAX_SHAPES} shapes; a key must name the query's shape, not a value (${k})`);
      const { stand, slots } = slotsOf(args);
      byKey.set(k, (template = templates(slots, (db) => build(db, shape, stand))));
    }
    const t = template(db);
    return db.executeQuery<O>({ ...t.compiled, parameters: bind(t, args) });
  };
}

/** The name each selection of a select query answers under (a column or an alias); null for anything else. */
function selectedNames(node: OperationNode): Array<string | null> | null {
  if (!SelectQueryNode.is(node)) return null;
  return (node.selections ?? []).map(({ selection }) => {
    if (AliasNode.is(selection) && IdentifierNode.is(selection.alias)) return selection.alias.name;
    if (ReferenceNode.is(selection) && ColumnNode.is(selection.column)) return selection.column.column.name;
    return null;
  });
}

/** A row of `columns` as a tuple: `[O[columns[0]], O[columns[1]], …]`. */
export type RowOf<O, C extends readonly string[]> = { -readonly [K in keyof C]: C[K] extends keyof O ? O[C[K]] : never };

/**
 * A precompiled select whose rows are tuples in the order of `columns`, which must be exactly its select list
 * (checked when it is compiled). On SQLite the statement runs in better-sqlite3's raw mode: building an object
 * per row through N-API was the largest part of a list page's SQLite time (20 rows: 54 µs as objects, 38 µs as
 * arrays, bench/http/RESULTS.md). Called on the database itself (not a transaction) while no transaction is
 * open on the connection, it reads straight from the handle (registerDirectReads), skipping Kysely's connection
 * mutex and its chain of promises; the rows are the same, and with a transaction open it waits through Kysely as
 * before, so it never sees another request's uncommitted writes. On PostgreSQL pg's row objects are read in the
 * select list's order; the round trip there costs far more than the conversion.
 */
export function precompileRows<const C extends readonly string[], A extends unknown[], O>(
  columns: C,
  build: (db: Kysely<DB>, ...args: A) => Compilable<O>,
) {
  const slots = positional(build);
  const template = templates(slots, (db) => build(db, ...(slots as unknown as A)), (compiled) => {
    const names = selectedNames(compiled.query);
    if (!names || names.join('\0') !== columns.join('\0')) {
      throw new Error(`precompileRows: the select list must be exactly ${columns.join(', ')} (${compiled.sql})`);
    }
  });
  const raw = new WeakMap<Template<O>, CompiledQuery<O>>();
  const asTuples = (rows: readonly unknown[]) => rows.map((r) => columns.map((c) => (r as Record<string, unknown>)[c]) as RowOf<O, C>);
  const rawOf = (t: Template<O>) => {
    let compiled = raw.get(t);
    if (!compiled) raw.set(t, (compiled = { ...t.compiled, sql: ROWS_AS_ARRAYS + t.compiled.sql }));
    return compiled;
  };
  // A better-sqlite3 handle opened without database.ts's statement cache answers objects: read them in order.
  const tuples = (rows: readonly unknown[]) => (rows.length === 0 || Array.isArray(rows[0]) ? (rows as Array<RowOf<O, C>>) : asTuples(rows));
  async function execute(db: Conn, ...args: A): Promise<Array<RowOf<O, C>>> {
    const t = template(db);
    if (t.sqlite) {
      const compiled = rawOf(t);
      const parameters = bind(t, args);
      return tuples(directReads.get(db)?.(compiled.sql, parameters) ?? (await db.executeQuery<unknown>({ ...compiled, parameters })).rows);
    }
    return asTuples((await db.executeQuery<O>({ ...t.compiled, parameters: bind(t, args) })).rows);
  }
  /**
   * The rows at once when they can be read straight from the SQLite handle now (as `execute` would read them),
   * else undefined (PostgreSQL, a transaction open on the connection): the caller then awaits `execute`. Spares a
   * hot read its promises and their trips through the microtask queue.
   */
  execute.now = (db: Conn, ...args: A): Array<RowOf<O, C>> | undefined => {
    const t = template(db);
    if (!t.sqlite) return undefined;
    const rows = directReads.get(db)?.(rawOf(t).sql, bind(t, args));
    return rows ? tuples(rows) : undefined;
  };
  return execute;
}
