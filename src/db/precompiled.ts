import type { Compilable, CompiledQuery, Kysely, QueryResult, Transaction } from 'kysely';
import type { DB } from './schema.js';

type Conn = Kysely<DB> | Transaction<DB>;

/** Stands in for a parameter while the query is built once; every occurrence must end up as a bound value. */
class Slot {
  constructor(readonly index: number) {}
}

interface Template<O> {
  compiled: CompiledQuery<O>;
  /** Per bound parameter: the argument index it comes from, or a constant fixed at build time. */
  params: Array<Slot | { constant: unknown }>;
}

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
  // Keyed by the dialect's adapter: a Kysely instance and its transactions share it, another database does not.
  const templates = new WeakMap<object, Template<O>>();

  function template(db: Conn): Template<O> {
    const adapter = db.getExecutor().adapter;
    let t = templates.get(adapter);
    if (t) return t;
    const slots = Array.from({ length: build.length - 1 }, (_, i) => new Slot(i));
    const compiled = build(db as Kysely<DB>, ...(slots as unknown as A)).compile();
    const seen = new Set<number>();
    const params = compiled.parameters.map((p) => {
      if (p instanceof Slot) {
        seen.add(p.index);
        return p;
      }
      return { constant: p };
    });
    if (seen.size !== slots.length || compiled.sql.includes('[object')) {
      throw new Error(`precompile: every argument must be a bound value of the query (${compiled.sql})`);
    }
    t = { compiled, params };
    templates.set(adapter, t);
    return t;
  }

  return async function execute(db: Conn, ...args: A): Promise<QueryResult<O>> {
    const t = template(db);
    const parameters = t.params.map((p) => (p instanceof Slot ? args[p.index] : p.constant));
    return db.executeQuery<O>({ ...t.compiled, parameters });
  };
}
