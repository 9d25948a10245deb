/**
 * Reading settings from a variable map, collecting every problem instead of stopping at the first; and setting some of
 * the process's own for a while (`withProcessEnv`).
 */

export type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

export class EnvReader {
  constructor(
    private readonly env: Env,
    private readonly problems: string[],
  ) {}

  optional(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value === '' ? undefined : value;
  }

  required(name: string): string | undefined {
    const value = this.optional(name);
    if (value === undefined) this.problems.push(`${name} is required`);
    return value;
  }

  /** An integer in [min, max]; `fallback` when unset (undefined for a setting that may stay off). */
  int<F extends number | undefined>(name: string, fallback: F, min: number, max: number): number | F {
    const raw = this.optional(name);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      this.problems.push(`${name} must be an integer from ${min} to ${max} (got "${raw}")`);
      return fallback;
    }
    return value;
  }

  intList(name: string, fallback: number[], min: number, max: number): number[] {
    const raw = this.optional(name);
    if (raw === undefined) return fallback;
    const values = raw.split(',').map((v) => Number(v.trim()));
    if (values.length === 0 || values.some((v) => !Number.isInteger(v) || v < min || v > max)) {
      this.problems.push(`${name} must be comma-separated integers from ${min} to ${max} (got "${raw}")`);
      return fallback;
    }
    return values;
  }

  list(name: string): string[] {
    return (this.optional(name) ?? '')
      .split(',')
      .map((v) => v.trim())
      .filter(Boolean);
  }

  /** A comma-separated subset of `known`; every known name when unset or empty. */
  subset<T extends string>(name: string, known: readonly T[]): T[] {
    const names = this.list(name);
    if (!names.length) return [...known];
    const unknown = names.filter((n) => !(known as readonly string[]).includes(n));
    if (unknown.length) this.problems.push(`${name} has unknown value(s) ${unknown.join(', ')}; known: ${known.join(', ')}`);
    return names.filter((n): n is T => (known as readonly string[]).includes(n));
  }

  bool(name: string, fallback: boolean): boolean {
    const raw = this.optional(name);
    if (raw === undefined) return fallback;
    if (['1', 'true', 'yes'].includes(raw.toLowerCase())) return true;
    if (['0', 'false', 'no'].includes(raw.toLowerCase())) return false;
    this.problems.push(`${name} must be true or false (got "${raw}")`);
    return fallback;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const raw = this.optional(name);
    if (raw === undefined) return fallback;
    if ((allowed as readonly string[]).includes(raw)) return raw as T;
    this.problems.push(`${name} must be one of ${allowed.join(', ')} (got "${raw}")`);
    return fallback;
  }
}

export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Buffer.isBuffer(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** Parses KEY=VALUE lines (the `.data/dev.env` the dev runner writes). */
export function parseEnvFile(text: string): Env {
  const out: Env = {};
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*([A-Z0-9_]+)\s*=\s*(.*?)\s*$/.exec(line);
    if (match?.[1] && !line.trimStart().startsWith('#')) out[match[1]] = match[2];
  }
  return out;
}

/** Runs `fn` with some process variables temporarily set, for libraries that read them when loaded. */
export function withProcessEnv<T>(vars: Record<string, string>, fn: () => T): T {
  const previous = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return fn();
  } finally {
    for (const [k, v] of Object.entries(previous)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
