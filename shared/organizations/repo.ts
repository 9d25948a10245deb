import type { Knex } from 'knex';
import type { Network } from '../config';

export type OrganizationStatus = 'active' | 'suspended';

export interface Organization {
  readonly id: string;
  readonly name: string;
  readonly status: OrganizationStatus;
  readonly credits: number;
  readonly createdAt: Date;
}

export interface WalletRow {
  readonly organizationId: string;
  readonly network: Network;
  readonly address: string;
  readonly publicKey: string;
  readonly seedEncrypted: string;
}

const toOrganization = (r: Record<string, unknown>): Organization => ({
  id: r.id as string,
  name: r.name as string,
  status: r.status as OrganizationStatus,
  credits: Number(r.credit_balance),
  createdAt: r.created_at as Date,
});

export async function insertOrganization(db: Knex | Knex.Transaction, name: string): Promise<Organization> {
  const [row] = await db('organizations').insert({ name }).returning('*');
  return toOrganization(row);
}

export async function findOrganization(db: Knex | Knex.Transaction, id: string): Promise<Organization | undefined> {
  const row = await db('organizations').where({ id }).first();
  return row ? toOrganization(row) : undefined;
}

export async function updateOrganizationStatus(db: Knex, id: string, status: OrganizationStatus): Promise<Organization | undefined> {
  const [row] = await db('organizations').where({ id }).update({ status, updated_at: db.fn.now() }).returning('*');
  return row ? toOrganization(row) : undefined;
}

export async function insertWallet(db: Knex | Knex.Transaction, wallet: WalletRow): Promise<void> {
  await db('wallets').insert({
    organization_id: wallet.organizationId,
    network: wallet.network,
    address: wallet.address,
    public_key: wallet.publicKey,
    seed_encrypted: wallet.seedEncrypted,
  });
}

export async function walletAddresses(db: Knex | Knex.Transaction, organizationId: string): Promise<Partial<Record<Network, string>>> {
  const rows = await db('wallets').where({ organization_id: organizationId }).select('network', 'address');
  return Object.fromEntries(rows.map((r) => [r.network, r.address]));
}

/**
 * Wallets found, by organization and network. A wallet row is written once, with its organization, and never
 * changed or removed (nothing updates `wallets`; an organization's deletion is not an operation of the service),
 * so a row once read stays true: a registration reads its wallet at prepare, at signing and at indexing, and
 * each process asks PostgreSQL once. Only found rows are kept (a missing wallet is asked again), the seed as
 * stored, sealed; at most `WALLETS_KEPT`, the oldest dropped first.
 */
const walletsFound = new Map<string, WalletRow>();
const WALLETS_KEPT = 10_000;

export async function findWallet(db: Knex | Knex.Transaction, organizationId: string, network: Network): Promise<WalletRow | undefined> {
  const key = `${organizationId}:${network}`;
  const kept = walletsFound.get(key);
  if (kept) return kept;
  const r = await db('wallets').where({ organization_id: organizationId, network }).first();
  if (!r) return undefined;
  const wallet: WalletRow = { organizationId, network, address: r.address, publicKey: r.public_key, seedEncrypted: r.seed_encrypted };
  if (walletsFound.size >= WALLETS_KEPT) walletsFound.delete(walletsFound.keys().next().value!);
  walletsFound.set(key, wallet);
  return wallet;
}

/** The organization's credit balance, kept by the ledger's trigger (0 for an unknown organization). */
export async function creditBalance(db: Knex | Knex.Transaction, organizationId: string): Promise<number> {
  const row = await db('organizations').where({ id: organizationId }).first('credit_balance');
  return row ? Number(row.credit_balance) : 0;
}
