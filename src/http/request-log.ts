import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * One log line per request, at `info`, once its answer has gone out, instead of Fastify's two ('incoming request', then
 * 'request completed'), which cost the reads 10–17 µs of CPU over LOG_LEVEL=warn; one line saves part of that and 40%
 * of the bytes (BENCHMARKS.md, "Request logging at the default LOG_LEVEL"). It carries what the first one did (method,
 * path, client address; src/lib/log.ts says what is left out) beside the status and the time taken. A 4xx or a 5xx
 * is `info` too: the line records the request, while the error handler (src/http/errors.ts) logs each 5xx's cause at
 * `error` with the same reqId, so a failure is one error line, not two.
 */
export class RequestLog extends LogController {
  override incomingRequest() {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply) {
    // An error here is the answer's stream failing while it was sent, not the request's outcome (Fastify's wording).
    if (error) reply.log.error({ req: request, res: reply, responseTime: reply.elapsedTime, err: error }, 'request errored');
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}
