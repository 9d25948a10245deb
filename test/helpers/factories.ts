import { randomBytes, randomUUID } from 'node:crypto';
import type { Resources } from '../../shared/resources';
import { createOrganization, setOrganizationStatus } from '../../shared/organizations/service';
import { createApiKey } from '../../shared/api-keys/service';
import type { Scope } from '../../shared/api-keys/types';

let counter = 0;

/** Every token and secret handed out in this run, for the log scan at the end of the suite. */
export const issuedSecrets = new Set<string>();

export async function createOrg(ctx: Resources, credits = 1000): Promise<string> {
  const org = await createOrganization({ db: ctx.db, box: ctx.box, chains: ctx.config.chains }, { name: `Test org ${++counter}`, credits });
  return org.organization_id;
}

export async function suspendOrg(ctx: Resources, organizationId: string): Promise<void> {
  await setOrganizationStatus(ctx, organizationId, 'suspended');
}

export interface TestKey {
  readonly id: string;
  readonly token: string;
  readonly webhookSecret: string;
}

export async function createKey(
  ctx: Resources,
  organizationId: string,
  scopes: Scope[] = ['works:register', 'works:update', 'works:read'],
  webhookUrl: string | null = null,
): Promise<TestKey> {
  const created = await createApiKey({ db: ctx.db, box: ctx.box, allowHttpWebhooks: true, allowPrivateWebhooks: true }, organizationId, {
    name: `key ${++counter}`,
    scopes,
    webhookUrl,
  });
  issuedSecrets.add(created.token).add(created.webhookSecret);
  return { id: created.key.id, token: created.token, webhookSecret: created.webhookSecret };
}

export interface WorkRowOptions {
  readonly network?: 'testnet' | 'mainnet';
  readonly externalUserRef?: string | null;
  /** Seconds before now() of each row's created_at (0 for all: one shared timestamp, ties broken by id). */
  readonly ageSeconds?: (index: number) => number;
}

/**
 * Finalized works inserted straight into the index, for volume (listing, pagination): `count` rows of one
 * organization, with ats_ids taken from the network's counter so real registrations never collide with them.
 * Returns their ids in insertion order.
 */
export async function insertWorks(ctx: Resources, organizationId: string, count: number, options: WorkRowOptions = {}): Promise<string[]> {
  const network = options.network ?? 'testnet';
  const [reserved] = await ctx.db('ats_counters').where({ network }).increment('next_id', count).returning('next_id');
  const firstAtsId = Number(reserved.next_id) - count;
  const rows = Array.from({ length: count }, (_, i) => ({
    id: randomUUID(),
    organization_id: organizationId,
    network,
    ats_id: firstAtsId + i,
    owner: '5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY',
    title: `Work ${++counter}`,
    asset_filename: `work-${counter}.wav`,
    latest_version: 1,
    latest_commitment: `0x${randomBytes(32).toString('hex')}`,
    external_user_ref: options.externalUserRef ?? null,
    has_files: true,
    created_at: ctx.db.raw(`now() - make_interval(secs => ?)`, [options.ageSeconds?.(i) ?? 0]),
    latest_version_at: ctx.db.fn.now(),
  }));
  for (let i = 0; i < rows.length; i += 500) await ctx.db('works').insert(rows.slice(i, i + 500));
  return rows.map((r) => r.id);
}
