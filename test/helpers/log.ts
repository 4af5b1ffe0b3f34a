import { pino } from 'pino';

/** A real pino logger (what `parley serve` logs with) whose JSON lines are kept in `lines`. */
export function captureLog() {
  const lines: Array<Record<string, any>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, any>) });
  return { logger, lines };
}
