import { AppError } from '../errors';

/**
 * A listing position (docs/api.md#listing-and-cursors: opaque cursors): the created_at and id of a work, the keys the listing is
 * ordered by. created_at keeps PostgreSQL's microseconds (a JavaScript Date would drop them, and two works
 * of the same millisecond would then be skipped or repeated).
 */
export interface Cursor {
  /** ISO 8601 UTC with microseconds, as PostgreSQL printed it. */
  readonly createdAt: string;
  readonly id: string;
}

const VERSION = 'w1';
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(`${VERSION}|${cursor.createdAt}|${cursor.id}`, 'utf8').toString('base64url');
}

/** Reads a cursor this service issued; anything else is a malformed query (400 common.bad_request). */
export function decodeCursor(value: string): Cursor {
  const invalid = () =>
    new AppError('common.bad_request', '`after` is not a cursor of this listing', [{ path: '/after', message: 'is not a valid cursor' }]);
  if (value.length > 200 || !/^[A-Za-z0-9_-]+$/.test(value)) throw invalid();
  const [version, createdAt, id, ...rest] = Buffer.from(value, 'base64url').toString('utf8').split('|');
  if (version !== VERSION || rest.length || !createdAt || !id || !TIMESTAMP.test(createdAt) || !UUID.test(id)) throw invalid();
  if (Number.isNaN(Date.parse(createdAt))) throw invalid();
  return { createdAt, id };
}
