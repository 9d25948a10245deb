import type { AppContext } from '../../shared/context';
import { createOrganization, setOrganizationStatus } from '../../shared/organizations/service';
import { createApiKey } from '../../shared/api-keys/service';
import type { Scope } from '../../shared/api-keys/types';

let counter = 0;

/** Every token and secret handed out in this run, for the log scan at the end of the suite. */
export const issuedSecrets = new Set<string>();

export async function createOrg(ctx: AppContext, credits = 1000): Promise<string> {
  const org = await createOrganization({ db: ctx.db, box: ctx.box, chains: ctx.config.chains }, { name: `Test org ${++counter}`, credits });
  return org.organization_id;
}

export async function suspendOrg(ctx: AppContext, organizationId: string): Promise<void> {
  await setOrganizationStatus(ctx.db, organizationId, 'suspended');
}

export interface TestKey {
  readonly id: string;
  readonly token: string;
  readonly webhookSecret: string;
}

export async function createKey(
  ctx: AppContext,
  organizationId: string,
  scopes: Scope[] = ['works:register', 'works:update', 'works:read'],
  webhookUrl: string | null = null,
): Promise<TestKey> {
  const created = await createApiKey({ db: ctx.db, box: ctx.box, allowHttpWebhooks: true }, organizationId, {
    name: `key ${++counter}`,
    scopes,
    webhookUrl,
  });
  issuedSecrets.add(created.token).add(created.webhookSecret);
  return { id: created.key.id, token: created.token, webhookSecret: created.webhookSecret };
}
