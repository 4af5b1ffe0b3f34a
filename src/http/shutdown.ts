import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/**
 * Requests whose work is still running, so shutdown closes the database only after them. The HTTP server's own
 * close waits for sockets, not for handlers: a client that hung up mid-request leaves its handler running, and
 * closing the database under it turned a write that would have committed into a logged 500
 * ("driver has already been destroyed").
 */
export function createInflight() {
  let running = 0;
  let waiters: (() => void)[] = [];

  function settleIfIdle() {
    if (running !== 0 || waiters.length === 0) return;
    // A handler's answer goes on to its onSend hooks (the idempotency record is a write) in the same chain of
    // callbacks: look again once that chain has run before calling the process idle.
    setImmediate(() => {
      if (running !== 0) return;
      const w = waiters;
      waiters = [];
      for (const resolve of w) resolve();
    });
  }

  return {
    /** Counts `work` as running until it settles; answers it unchanged (its rejection stays the caller's to handle). */
    track<T>(work: Promise<T>): Promise<T> {
      running++;
      const leave = () => {
        running--;
        settleIfIdle();
      };
      work.then(leave, leave);
      return work;
    },
    /** Resolves once nothing is running (at once when nothing is). */
    drained(): Promise<void> {
      return new Promise((resolve) => {
        waiters.push(resolve);
        settleIfIdle();
      });
    },
  };
}

export type Inflight = ReturnType<typeof createInflight>;

/**
 * From the moment the app closes, ends each keep-alive connection as soon as it carries no request. Node's
 * server.close() waits for every open connection but closes only those idle at that instant: not one a client
 * opened ahead and has not used yet (browsers and undici do), nor one whose response was in flight, which then
 * stays open for a next request. Either kept shutdown waiting for its deadline, and exiting 1. The preClose hook
 * runs before Fastify's server.close(). `_httpMessage` is the response a connection is busy with (Node sets and
 * clears it; http-terminator relies on it too): reading it at close costs nothing per request, unlike counting
 * requests in hooks.
 */
export function registerConnectionClosing(app: FastifyInstance) {
  const sockets = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  app.addHook('preClose', (done) => {
    for (const socket of sockets) {
      const res = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
      if (!res) {
        socket.destroy();
        continue;
      }
      // Said in the response when it has not started; the connection is closed once it has gone in any case.
      if (!res.headersSent) res.setHeader('connection', 'close');
      if (res.writableFinished) socket.end();
      else res.once('close', () => socket.end());
    }
    done();
  });
}
