import { pino } from 'pino';

/** The part of a pino logger the services use; tests pass their own or none. */
export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };

/** The process's one logger (JSON lines on stderr), shared by Fastify, the services and the worker. */
export function createLogger(level: string) {
  return pino({ level }, pino.destination(2));
}
