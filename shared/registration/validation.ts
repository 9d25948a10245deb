import { AppError, type ErrorDetail } from '../errors';
import type { Config, Network } from '../config';
import type { Creator } from '../works/types';

/**
 * Rules of docs/api.md#field-rules that a JSON schema cannot state (trimming, byte lengths, check
 * characters). Everything is checked and reported together as one 422.
 */
export function titleProblems(title: string): ErrorDetail[] {
  const trimmed = title.trim();
  if (trimmed.length === 0) return [{ path: '/title', message: 'must not be empty' }];
  if ([...trimmed].length > 300) return [{ path: '/title', message: 'must be at most 300 characters' }];
  return [];
}

export function filenameProblems(filename: string): ErrorDetail[] {
  const bytes = Buffer.byteLength(filename, 'utf8');
  if (bytes < 1 || bytes > 255 || /[/\\\p{Cc}]/u.test(filename) || filename === '.' || filename === '..') {
    return [{ path: '/filename', message: 'must be 1 to 255 bytes, without /, \\, NUL or control characters, and not . or ..' }];
  }
  return [];
}

export function isniCheckCharacter(first15: string): string {
  let total = 0;
  for (const digit of first15) total = (total + Number(digit)) * 2;
  const result = (12 - (total % 11)) % 11;
  return result === 10 ? 'X' : String(result);
}

export function creatorProblems(creators: readonly Creator[]): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  creators.forEach((creator, i) => {
    if (creator.full_name.trim().length === 0) problems.push({ path: `/creators/${i}/full_name`, message: 'must not be empty' });
    if (!Object.values(creator.roles).some((v) => v === true))
      problems.push({ path: `/creators/${i}/roles`, message: 'at least one role must be true' });
    if (
      creator.isni !== undefined &&
      /^[0-9]{15}[0-9X]$/.test(creator.isni) &&
      isniCheckCharacter(creator.isni.slice(0, 15)) !== creator.isni[15]
    ) {
      problems.push({ path: `/creators/${i}/isni`, message: 'has an invalid ISO 7064 Mod 11-2 check character' });
    }
  });
  return problems;
}

export function refProblems(ref: string | undefined): ErrorDetail[] {
  if (ref === undefined) return [];
  const bytes = Buffer.byteLength(ref, 'utf8');
  return bytes >= 1 && bytes <= 255 ? [] : [{ path: '/external_user_ref', message: 'must be 1 to 255 bytes' }];
}

export function networkProblems(config: Pick<Config, 'chains'>, network: Network): ErrorDetail[] {
  return config.chains.some((c) => c.network === network)
    ? []
    : [{ path: '/network', message: `${network} is not available on this deployment` }];
}

export function assertValid(problems: ErrorDetail[]): void {
  if (problems.length) {
    throw new AppError(
      'common.validation_failed',
      `Invalid request body: ${problems.map((p) => `${p.path} ${p.message}`).join('; ')}`,
      problems,
    );
  }
}
