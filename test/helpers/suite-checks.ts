import { createDb } from '../../shared/db/knex';
import { SecretBox } from '../../shared/crypto/secret-box';
import { walletSeedAad } from '../../shared/organizations/service';
import { logLines } from './app';
import { contractStats } from './contract';
import { issuedSecrets } from './factories';
import { testServices } from './services';

/**
 * Checks over the whole run, made by the root `afterAll` hook (test/helpers/hooks.ts) once every test file
 * has run, whatever the files and their order: a violation fails the run (mocha exits non-zero).
 */

/** Every response the run's tests received went through the OpenAPI check (test/helpers/contract.ts). */
export function contractProblems(): string[] {
  const { requests, validated, skipped, mismatched } = contractStats;
  if (requests)
    process.stdout.write(
      `  ${validated} responses validated against the OpenAPI document (${skipped} from Bull Board's own API not ours to describe, ${mismatched} mismatched)\n`,
    );
  const problems: string[] = [];
  if (validated + skipped + mismatched !== requests)
    problems.push(`${requests} responses received, yet ${validated + skipped + mismatched} went through the OpenAPI check`);
  if (mismatched) problems.push(`${mismatched} responses did not match the OpenAPI document (each failed the test that made it)`);
  return problems;
}

/** The secrets a log line must never hold: every token handed out, every wallet seed, the SECRETS_KEY. */
export async function knownSecrets(): Promise<Set<string>> {
  const secrets = new Set(issuedSecrets);
  const { config } = testServices();
  secrets.add(config.secrets.key.toString('base64'));
  const db = createDb(config.database);
  try {
    const box = new SecretBox(config.secrets.key);
    for (const wallet of await db('wallets').select('organization_id', 'network', 'seed_encrypted')) {
      const seed = box.open(wallet.seed_encrypted, walletSeedAad(wallet.organization_id, wallet.network));
      secrets.add(seed.toString('hex')).add(seed.toString('base64'));
    }
  } finally {
    await db.destroy();
  }
  return secrets;
}

/** Log lines holding a credential, or an authorization header not redacted. */
export function leaks(lines: readonly string[], secrets: ReadonlySet<string>): string[] {
  const found: string[] = [];
  for (const line of lines) {
    for (const secret of secrets)
      if (secret && line.includes(secret))
        found.push(`${secret.slice(0, 12)}… in ${line.split(secret).join('[the credential]').slice(0, 200)}`);
    if (/authorization/i.test(line) && !line.includes('[redacted]')) found.push(`authorization not redacted in ${line.slice(0, 160)}`);
  }
  return found;
}

/** Both checks over the whole run; throws with every violation found. */
export async function checkWholeRun(): Promise<void> {
  const problems = contractProblems();
  const secrets = await knownSecrets();
  const leaked = leaks(logLines, secrets);
  process.stdout.write(`  ${logLines.length} log lines scanned for ${secrets.size} credentials: ${leaked.length} leaks\n`);
  problems.push(...leaked.map((l) => `credential in the logs: ${l}`));
  if (problems.length) throw new Error(`the run as a whole:\n  ${problems.join('\n  ')}`);
}
