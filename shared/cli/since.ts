import ms from 'ms';
import { fullFormats } from 'ajv-formats/dist/formats';
import { AppError } from '../errors';

// RFC 3339's date-time as the API's schemas check it (a real calendar date, an offset required: no local time)
const dateTime = fullFormats['date-time'] as { validate: (value: string) => boolean };

/**
 * The start of a window given as `--since`: a duration back from `now` (`30m`, `1h`, `2d`, anything `ms` reads
 * with a unit) or an ISO 8601 timestamp with its offset (`2026-11-23T06:00:00Z`). A bare number is refused: `ms`
 * would read it as milliseconds, which nobody typing `--since 5` means.
 */
export function parseSince(raw: string, now = new Date()): Date {
  const refuse = () =>
    new AppError(
      'common.bad_request',
      `--since must be a duration such as 30m, 1h or 2d, or an ISO 8601 timestamp with an offset (got "${raw}")`,
    );
  if (dateTime.validate(raw)) return new Date(raw);
  if (/^[\d.]+$/.test(raw)) throw refuse();
  const span = ms(raw as ms.StringValue) as number | undefined;
  const since = new Date(now.getTime() - (span ?? NaN));
  if (!span || span <= 0 || Number.isNaN(since.getTime())) throw refuse();
  return since;
}
