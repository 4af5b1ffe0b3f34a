import { createLogger } from '../../src/lib/log.js';

/** The logger `parley serve` logs with (its level, serializers), its JSON lines kept in `lines` instead of on stderr. */
export function captureLog() {
  const lines: Array<Record<string, any>> = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, any>) });
  return { logger, lines };
}
