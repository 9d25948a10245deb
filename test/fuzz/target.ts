import { randomUUID } from 'node:crypto';
import { call, type TestApp } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { adminToken, operatorToken } from '../helpers/identity';
import { register } from '../helpers/registration';
import type { FuzzTarget } from './property';

/**
 * An organization with a confirmed registration and credentials of every kind (valid and broken), against
 * the running app. Needs a `prepare` worker for the registration.
 */
export async function fuzzTarget(app: TestApp): Promise<FuzzTarget> {
  const org = await createOrg(app.context, 1_000_000);
  const key = await createKey(app.context, org);
  const registerOnly = await createKey(app.context, org, ['works:register']);
  // a read-only key's session: the least a partner can hand an end user
  const reader = await createKey(app.context, org, ['works:read']);
  // the key revocations may take: not one the fuzzer authenticates with
  const spare = await createKey(app.context, org, ['works:read']);
  const r = await register(app.url, key.token);
  const tx = await app.context.db('transactions').where({ id: r.confirm.body.transaction_id }).first();
  const session = await call(app.url, 'POST', '/v1/sessions', { token: key.token, body: { external_user_ref: 'fuzz-user' } });
  return {
    url: app.url,
    db: app.context.db,
    ids: { organizationId: org, transactionId: tx.id, atsId: String(tx.ats_id), apiKeyId: spare.id },
    credentials: {
      none: undefined,
      garbage: 'Bearer garbage',
      emptyBearer: 'Bearer ',
      forgedKey: 'Bearer wrk_live_' + 'A'.repeat(40),
      basic: 'Basic Zm9vOmJhcg==',
      key: `Bearer ${key.token}`,
      registerOnlyKey: `Bearer ${registerOnly.token}`,
      session: `Bearer ${session.body.session_token}`,
      admin: `Bearer ${await adminToken({ organizationId: org })}`,
      operator: `Bearer ${await operatorToken({ organizationId: org })}`,
      readerSession: `Bearer ${(await call(app.url, 'POST', '/v1/sessions', { token: reader.token, body: { external_user_ref: 'fuzz-reader' } })).body.session_token}`,
      otherAdmin: `Bearer ${await adminToken({ organizationId: randomUUID() })}`,
      expiredAdmin: `Bearer ${await adminToken({ organizationId: org, expiresInSeconds: -60 })}`,
    },
  };
}
