import { expect } from 'chai';
import { call, eventually } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { adminToken, operatorToken } from '../helpers/identity';
import { useStack } from '../helpers/workers';
import { initBody, register } from '../helpers/registration';
import type { Scope } from '../../shared/api-keys/types';

type Org = 'A' | 'B';
interface Credential {
  readonly name: string;
  readonly org: Org | null;
  readonly kind: 'key' | 'session' | 'admin' | 'operator' | 'none' | 'invalid';
  readonly scopes: readonly Scope[];
  readonly ref?: string;
  readonly token: string | undefined;
}
interface Resource {
  readonly org: Org;
  readonly ref: string;
  readonly orgId: string;
  readonly workId: string;
  readonly atsId: number;
  readonly txId: string;
  /** A key of the organization that a revocation may take. */
  readonly spareKeyId: string;
}

/** What the contract says a credential gets on a route (the status), given whose resource it names. */
function expected(route: string, c: Credential, r: Resource | undefined): number {
  if (c.kind === 'invalid' || c.kind === 'none') return 401;
  const own = r === undefined || c.org === r.org;
  // an identity token without the admin role is refused by the org routes (403); keys and sessions are no JWT (401)
  const admin = (ok: number) => (c.kind === 'operator' ? 403 : c.kind !== 'admin' ? 401 : own ? ok : 403);
  const operator = (ok: number) => (c.kind === 'operator' ? ok : c.kind === 'admin' ? 403 : 401);
  const keyWith = (scope: Scope | null, ok: number, session: 'no' | 'ref') => {
    if (c.kind === 'admin' || c.kind === 'operator') return 401;
    if (c.kind === 'session') return session === 'no' ? 403 : own && c.ref === r?.ref ? ok : r ? 404 : ok;
    if (scope && !c.scopes.includes(scope)) return 403;
    return own ? ok : 404;
  };
  switch (route) {
    case 'createApiKey':
      return admin(201);
    case 'listApiKeys':
      return admin(200);
    case 'revokeApiKey':
      return admin(204);
    case 'getTransaction':
      return keyWith(null, 200, 'ref');
    case 'initRegistration':
      return keyWith('works:register', 200, 'no');
    case 'initVersion':
      return keyWith('works:update', 200, 'no');
    case 'createSession':
      return keyWith('works:read', 201, 'no');
    case 'listWorks':
      return keyWith('works:read', 200, 'ref');
    case 'getWork':
    case 'listWorkVersions':
    case 'listWorkCreators':
    case 'downloadLatestAudio':
    case 'downloadLatestCertificate':
    case 'downloadVersionAudio':
    case 'downloadVersionCertificate':
      return keyWith('works:read', 200, 'ref');
    case 'metrics':
    case 'boardQueues':
      return operator(200);
    default:
      throw new Error(`no expectation for ${route}`);
  }
}

describe('isolation matrix: every credential on every resource', function () {
  this.timeout(300_000);
  const stack = useStack({ env: { REDIS_PREFIX: `isolation_${Date.now()}` } });

  it('lets through only what the contract allows, and never shows another organization’s data', async () => {
    const app = stack.app;
    const creds: Credential[] = [
      { name: 'garbage', org: null, kind: 'invalid', scopes: [], token: 'wrk_live_' + 'A'.repeat(40) },
      { name: 'none', org: null, kind: 'none', scopes: [], token: undefined },
    ];
    const resources: Resource[] = [];
    const ids: Record<Org, string[]> = { A: [], B: [] };
    for (const org of ['A', 'B'] as const) {
      const orgId = await createOrg(app.context, 100_000);
      const all = await createKey(app.context, orgId, ['works:register', 'works:update', 'works:read']);
      for (const scope of ['works:register', 'works:update', 'works:read'] as const) {
        creds.push({
          name: `${org} key ${scope}`,
          org,
          kind: 'key',
          scopes: [scope],
          token: (await createKey(app.context, orgId, [scope])).token,
        });
      }
      creds.push({ name: `${org} admin`, org, kind: 'admin', scopes: [], token: await adminToken({ organizationId: orgId }) });
      creds.push({ name: `${org} operator`, org, kind: 'operator', scopes: [], token: await operatorToken({ organizationId: orgId }) });
      for (const ref of ['r1', 'r2']) {
        const session = await call(app.url, 'POST', '/v1/sessions', { token: all.token, body: { external_user_ref: ref } });
        creds.push({ name: `${org} session ${ref}`, org, kind: 'session', scopes: ['works:read'], ref, token: session.body.session_token });
        const r = await register(app.url, all.token, initBody({ external_user_ref: ref }));
        const tx = await eventually(
          async () => {
            const row = await app.context.db('transactions').where({ id: r.confirm.body.transaction_id }).first();
            return row.status === 'finalized' ? row : undefined;
          },
          'finality',
          120_000,
        );
        const spare = await createKey(app.context, orgId, ['works:read']);
        resources.push({ org, ref, orgId, workId: tx.work_id, atsId: Number(tx.ats_id), txId: tx.id, spareKeyId: spare.id });
        ids[org].push(tx.work_id, tx.id, spare.id);
      }
      ids[org].push(orgId, all.id);
    }

    const body = { network: 'testnet', creators: [{ full_name: 'Iso', roles: { author: true } }] };
    const routes: [string, (r: Resource) => [string, string, unknown?]][] = [
      ['listApiKeys', (r) => ['GET', `/v1/organizations/${r.orgId}/api-keys`]],
      ['createApiKey', (r) => ['POST', `/v1/organizations/${r.orgId}/api-keys`, { name: 'iso', scopes: ['works:read'] }]],
      ['getTransaction', (r) => ['GET', `/v1/transactions/${r.txId}`]],
      ['initVersion', (r) => ['POST', `/v1/works/${r.atsId}/versions/init`, body]],
      ['getWork', (r) => ['GET', `/v1/works/${r.atsId}?network=testnet`]],
      ['listWorkVersions', (r) => ['GET', `/v1/works/${r.atsId}/versions?network=testnet`]],
      ['listWorkCreators', (r) => ['GET', `/v1/works/${r.atsId}/creators?network=testnet`]],
      ['downloadLatestAudio', (r) => ['GET', `/v1/works/${r.workId}/download/asset`]],
      ['downloadLatestCertificate', (r) => ['GET', `/v1/works/${r.workId}/download/certificate`]],
      ['downloadVersionAudio', (r) => ['GET', `/v1/works/${r.workId}/versions/1/download/audio`]],
      ['downloadVersionCertificate', (r) => ['GET', `/v1/works/${r.workId}/versions/1/download/certificate`]],
      ['revokeApiKey', (r) => ['DELETE', `/v1/organizations/${r.orgId}/api-keys/${r.spareKeyId}`]],
    ];
    const unscoped: [string, [string, string, unknown?]][] = [
      ['initRegistration', ['POST', '/v1/works/init', initBody()]],
      ['createSession', ['POST', '/v1/sessions', { external_user_ref: 'iso' }]],
      ['listWorks', ['GET', '/v1/works?network=testnet&first=100']],
      ['metrics', ['GET', '/metrics']],
      ['boardQueues', ['GET', '/admin/queues/api/queues']],
    ];

    const mismatches: string[] = [];
    let requests = 0;
    const check = async (route: string, c: Credential, r: Resource | undefined, [method, path, payload]: [string, string, unknown?]) => {
      const reply = await call(app.url, method, path, { token: c.token, body: payload });
      requests++;
      const want = expected(route, c, r);
      if (reply.status !== want)
        mismatches.push(
          `${c.name} ${route} on ${r ? `${r.org}/${r.ref}` : '-'}: ${reply.status}, expected ${want} (${reply.text.slice(0, 120)})`,
        );
      const other = c.org === 'A' ? ids.B : c.org === 'B' ? ids.A : [...ids.A, ...ids.B];
      // operators see every organization by design: the leak check is for the organization-bound roles
      const leaked =
        route === 'metrics' || route === 'boardQueues' ? [] : other.filter((id) => reply.text.includes(id) && !path.includes(id));
      if (leaked.length) mismatches.push(`${c.name} ${route}: response shows ${leaked.join(', ')}`);
      if (route === 'listWorks' && reply.status === 200 && c.kind === 'session') {
        const own = resources.filter((x) => x.org === c.org && x.ref === c.ref).map((x) => x.workId);
        const shown = (reply.body.works as { id: string }[]).map((w) => w.id);
        if (!shown.every((id) => own.includes(id))) mismatches.push(`${c.name} listWorks shows works of another ref`);
      }
      return reply.status;
    };

    for (const [route, request] of routes) {
      for (const r of resources) {
        for (const c of creds) {
          const status = await check(route, c, r, request(r));
          if (route === 'revokeApiKey' && status === 204) {
            // put a spare key back for the next credential
            (r as { spareKeyId: string }).spareKeyId = (await createKey(app.context, r.orgId, ['works:read'])).id;
            ids[r.org].push(r.spareKeyId);
          }
        }
      }
    }
    for (const [route, request] of unscoped) for (const c of creds) await check(route, c, undefined, request);

    process.stdout.write(
      `      ${requests} requests: ${creds.length} credentials × ${routes.length} resource routes × ${resources.length} resources, and ${unscoped.length} organization-wide routes\n`,
    );
    expect(mismatches).to.deep.equal([]);
  });
});
