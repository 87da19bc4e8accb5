import pino from 'pino';

export type Logger = pino.Logger;

/** JSON logs on stderr (stdout stays free for command output); level from LOG_LEVEL, default info. */
export function createLogger(component: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ level, base: { component, pid: process.pid } }, pino.destination(2));
}
