import { prettyFactory } from 'pino-pretty';
import type { DestinationStream } from 'pino';

/**
 * Where `npm run dev` sends its logs. To a terminal: one readable line per entry (pino-pretty: time, level,
 * the process, the message; other fields on the lines below it), a request's access line on one line
 * (`web: GET /docs 200 0.9 ms`). To a pipe or a file: pino's JSON lines as in production (undefined: pino's own
 * stdout destination), for tools to parse.
 */
export function devLogDestination(out: NodeJS.WritableStream & { isTTY?: boolean }): DestinationStream | undefined {
  if (!out.isTTY) return undefined;
  const format = prettyFactory({
    colorize: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service,process',
    messageFormat: '{if process}{process}: {end}{msg}',
  });
  return {
    write(line: string) {
      out.write(format(compactRequest(JSON.parse(line) as Record<string, unknown>)));
    },
  };
}

/** The access log's entry (web/middleware/access-log.ts) as its message alone; any other entry as it is. */
export function compactRequest(entry: Record<string, unknown>): Record<string, unknown> {
  if (entry.msg !== 'request' || typeof entry.method !== 'string') return entry;
  const { method, url, status, ms, request_id: _requestId, ...rest } = entry;
  return { ...rest, msg: `${method} ${url} ${status} ${ms} ms` };
}
