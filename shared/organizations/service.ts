import type { Knex } from 'knex';
import { NETWORKS, type Config, type Network } from '../config';
import { AppError, notFound } from '../errors';
import { generateSr25519 } from '../chain/keys';
import type { SecretBox } from '../crypto/secret-box';
import { appendLedgerEntry } from '../ledger/service';
import * as repo from './repo';
import { recordOrganizationStatus, type KeyCacheDeps } from '../api-keys/key-cache';

export interface OrganizationView {
  readonly organization_id: string;
  readonly name: string;
  readonly status: repo.OrganizationStatus;
  readonly credits: number;
  readonly wallets: Partial<Record<Network, string>>;
}

export interface OrganizationDeps {
  readonly db: Knex;
  readonly box: SecretBox;
  readonly chains: Config['chains'];
}

/** The associated data that binds a wallet seed's ciphertext to its organization and network. */
export const walletSeedAad = (organizationId: string, network: Network) => `wallet:${organizationId}:${network}`;

/** Lends the organization's wallet seed on `network` to `use`: opened for it alone, and wiped after. */
export async function withWalletSeed<T>(
  deps: Pick<OrganizationDeps, 'db' | 'box'>,
  organizationId: string,
  network: Network,
  use: (seed: Buffer) => Promise<T>,
): Promise<T> {
  const wallet = await repo.findWallet(deps.db, organizationId, network);
  if (!wallet) throw new Error(`organization ${organizationId} has no ${network} wallet`);
  const seed = deps.box.open(wallet.seedEncrypted, walletSeedAad(organizationId, network));
  try {
    return await use(seed);
  } finally {
    seed.fill(0);
  }
}

/** Creates an organization with one wallet per network and an optional opening grant, atomically. */
export async function createOrganization(deps: OrganizationDeps, input: { name: string; credits?: number }): Promise<OrganizationView> {
  const name = input.name.trim();
  if (!name || name.length > 200)
    throw new AppError('common.validation_failed', 'name must be 1 to 200 characters', [
      { path: '/name', message: 'must be 1 to 200 characters' },
    ]);
  const credits = input.credits ?? 0;
  if (!Number.isSafeInteger(credits) || credits < 0) {
    throw new AppError('common.validation_failed', 'credits must be a non-negative integer', [
      { path: '/credits', message: 'must be a non-negative integer' },
    ]);
  }
  const id = await deps.db.transaction(async (trx) => {
    const org = await repo.insertOrganization(trx, name);
    for (const network of NETWORKS) {
      const prefix = deps.chains.find((c) => c.network === network)?.ss58Prefix ?? 42;
      const pair = await generateSr25519(prefix);
      await repo.insertWallet(trx, {
        organizationId: org.id,
        network,
        address: pair.address,
        publicKey: pair.publicKey,
        seedEncrypted: deps.box.seal(pair.seed, walletSeedAad(org.id, network)),
      });
      pair.seed.fill(0);
    }
    if (credits > 0) await appendLedgerEntry(trx, { organizationId: org.id, kind: 'grant', amount: credits, reason: 'opening grant' });
    return org.id;
  });
  return showOrganization(deps.db, id);
}

export async function showOrganization(db: Knex, id: string): Promise<OrganizationView> {
  const org = await findOrThrow(db, id);
  return { organization_id: org.id, name: org.name, status: org.status, credits: org.credits, wallets: await repo.walletAddresses(db, id) };
}

export async function creditOrganization(
  db: Knex,
  id: string,
  amount: number,
  reason?: string,
): Promise<{ organization_id: string; credits: number }> {
  if (!Number.isSafeInteger(amount) || amount === 0) {
    throw new AppError('common.validation_failed', 'amount must be a non-zero integer', [
      { path: '/amount', message: 'must be a non-zero integer' },
    ]);
  }
  await findOrThrow(db, id);
  const result = await appendLedgerEntry(db, { organizationId: id, kind: amount > 0 ? 'grant' : 'adjustment', amount, reason });
  return { organization_id: id, credits: result.balance };
}

/**
 * Suspends or activates in PostgreSQL, then records the status where the web checks keys (api-keys/key-cache.ts)
 * before answering: every web process applies it from its next request.
 */
export async function setOrganizationStatus(
  deps: KeyCacheDeps & { readonly db: Knex },
  id: string,
  status: repo.OrganizationStatus,
): Promise<{ organization_id: string; status: repo.OrganizationStatus }> {
  if (!isUuid(id)) throw notFound('Organization');
  const org = await repo.updateOrganizationStatus(deps.db, id, status);
  if (!org) throw notFound('Organization');
  await recordOrganizationStatus(deps, org.id, org.status);
  return { organization_id: org.id, status: org.status };
}

async function findOrThrow(db: Knex, id: string): Promise<repo.Organization> {
  const org = isUuid(id) ? await repo.findOrganization(db, id) : undefined;
  if (!org) throw notFound('Organization');
  return org;
}

export function isUuid(value: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value);
}
