import type { FastifyReply, FastifyRequest } from 'fastify';
import { pino } from 'pino';

/** The part of a pino logger the services use; tests pass their own or none. */
export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };

/** A request's path: its query string can carry a customer's id (DELETE /v1/conversations?customerId=…). */
export const pathOf = (url: string) => {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
};

/**
 * How a request and its answer appear in any log line (they replace Fastify's, which add the query string, Host and
 * the client's port). Never a header or a body: the Authorization header is a key.
 */
const serializers = {
  req: (req: FastifyRequest) => ({ method: req.method, url: pathOf(req.url), remoteAddress: req.ip }),
  res: (reply: FastifyReply) => ({ statusCode: reply.statusCode }),
};

/**
 * The process's one logger (JSON lines on stderr), shared by Fastify, the services and the worker; tests capture it.
 * Writes are asynchronous (pino.destination's default): a line logged while a write is in flight waits in memory, and
 * pino writes what waits when the process exits, after an uncaught exception or process.exit too
 * (test/lib/log.test.ts), though not on a SIGKILL. Synchronous writes cost a read 4–16 µs more CPU at LOG_LEVEL=info
 * (BENCHMARKS.md, "Request logging at the default LOG_LEVEL").
 */
export function createLogger(level: string, destination: pino.DestinationStream = pino.destination(2)) {
  return pino({ level, serializers }, destination);
}
