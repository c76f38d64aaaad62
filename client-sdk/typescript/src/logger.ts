/**
 * Where the SDK's warnings and errors go. The model is pino: a call is
 * `logger.warn(fields, message)`, fields first, and a pino logger (or a
 * child: `logger: app.log.child({ component: 'trustmsg' })`, Fastify's
 * `app.log`) fits as it is. Without a logger, one JSON line per event goes
 * to stderr, in pino's shape (`level`, `time`, `name`, `msg`, the fields).
 *
 * The old form, `warn(message, fields)` (winston's order), still works but
 * is deprecated: an object given as `logger` is called that way unless it
 * is a pino logger (it has `child` and `bindings`) or is marked with
 * {@link structuredLogger}. `console` is taken as "no logger": the same
 * single JSON line, through `console.warn`/`console.error`.
 */

/** A logger in pino's order, fields first: what pino, its children and Fastify's `app.log` are. */
export interface Logger {
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/**
 * @deprecated The SDK's old logger, message first (winston's order). Still
 * called that way when given; use a pino logger, or mark your own
 * fields-first object with {@link structuredLogger}.
 */
export interface MessageFirstLogger {
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** What the `logger` options take. */
// eslint-disable-next-line @typescript-eslint/no-deprecated -- the old form is still taken
export type AnyLogger = Logger | MessageFirstLogger;

const FIELDS_FIRST = Symbol.for('trustmsg.logger.fields-first');

/** Marks `logger` as fields first (pino's order) when it is not a pino logger itself; returns it. */
export function structuredLogger<L extends Logger>(logger: L): L {
  Object.defineProperty(logger, FIELDS_FIRST, { value: true, enumerable: false });
  return logger;
}

/** pino's numbers for its level names. */
const LEVELS = { warn: 40, error: 50 } as const;

/** One line of JSON, as pino writes it; a value JSON cannot hold (a bigint, a cycle) is written as text. */
export function jsonLine(level: 'warn' | 'error', fields: Record<string, unknown>, message: string): string {
  const record = { level: LEVELS[level], time: Date.now(), name: 'trustmsg', msg: message, ...fields };
  const seen = new WeakSet();
  return JSON.stringify(record, (_k, v: unknown) => {
    if (typeof v === 'bigint') return v.toString();
    if (v instanceof Error) return { type: v.name, message: v.message };
    if (typeof v === 'object' && v !== null) {
      if (seen.has(v)) return '[Circular]';
      seen.add(v);
    }
    return v;
  });
}

/** The default: one JSON line per event on stderr. */
const stderrLogger: Logger = {
  warn: (fields, message) => process.stderr.write(`${jsonLine('warn', fields, message)}\n`),
  error: (fields, message) => process.stderr.write(`${jsonLine('error', fields, message)}\n`),
};

/** `console` as given: the same line, through console (tests and tools that capture it still see it). */
const consoleLogger: Logger = {
  warn: (fields, message) => {
    console.warn(jsonLine('warn', fields, message));
  },
  error: (fields, message) => {
    console.error(jsonLine('error', fields, message));
  },
};

function isFieldsFirst(l: object): boolean {
  const o = l as { child?: unknown; bindings?: unknown; [FIELDS_FIRST]?: unknown };
  return o[FIELDS_FIRST] === true || (typeof o.child === 'function' && typeof o.bindings === 'function');
}

/** The SDK's view of whatever logger it was given: always fields first. */
export function toLogger(given: AnyLogger | undefined): Logger {
  if (given === undefined || given === null) return stderrLogger;
  if ((given as unknown) === console) return consoleLogger;
  if (isFieldsFirst(given)) return given as Logger;
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- called the old way, as it was given
  const old = given as MessageFirstLogger;
  return {
    warn: (fields, message) => {
      old.warn(message, fields);
    },
    error: (fields, message) => {
      old.error(message, fields);
    },
  };
}
