import { expect } from 'chai';
import { Readable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { useStack } from '../../test/helpers/workers';
import { createKey, createOrg, issuedSecrets, insertWorks } from '../../test/helpers/factories';
import { adminToken } from '../../test/helpers/identity';
import { createClient, WorksApiError, type Transaction, type WebSocketConstructor } from '../src';
import { sineWav } from './audio';

const STEPS = ['validating', 'preparing_transaction', 'signing', 'submitting', 'confirming', 'completed'];

/** The `ws` constructor, counting the sockets the client opens. */
function countingWebSocket(): { WebSocket: WebSocketConstructor; opened: string[] } {
  const opened: string[] = [];
  class Counting extends WebSocket {
    constructor(url: string, options?: WebSocket.ClientOptions) {
      super(url, options);
      opened.push(url);
    }
  }
  return { WebSocket: Counting, opened };
}

describe('@works-api/client: the partner journey against the real stack', function () {
  this.timeout(180_000);
  const stack = useStack();

  it('registers real audio, follows the transaction over the WebSocket, lists, adds versions and downloads', async () => {
    const org = await createOrg(stack.app.context, 100_000);
    const key = await createKey(stack.app.context, org);
    const sockets = countingWebSocket();
    const client = createClient({ baseUrl: stack.app.url, token: key.token, WebSocket: sockets.WebSocket });
    const audio = sineWav(1);
    const creators = [{ full_name: 'Ada Lovelace', roles: { composer: true }, email: 'ada@example.test' }];

    const registration = await client.works.register(
      { network: 'testnet', title: '  A4 for One Second ', filename: 'a4.wav', creators },
      audio,
    );
    expect(registration.quote.is_valid).to.equal(true);
    expect(registration.quote.job_id).to.equal(registration.job_id);
    expect(registration.status_url).to.equal(`/v1/transactions/${registration.transaction_id}`);

    const updates: Transaction[] = [];
    const done = await client.transactions.wait(registration.transaction_id, { onUpdate: (tx) => updates.push(tx) });
    expect(done.status, JSON.stringify(done.result)).to.equal('finalized');
    expect(sockets.opened).to.have.length(1);
    expect(sockets.opened[0]).to.match(new RegExp(`^ws://127\\.0\\.0\\.1:\\d+/v1/ws/transactions/${registration.transaction_id}$`));
    // every step from the one current at connection arrived over the socket, in order; the last is what REST answers
    const steps = updates.map((u) => u.current_step).filter((step, i, all) => step !== all[i - 1]);
    expect(steps).to.deep.equal(STEPS.slice(STEPS.indexOf(steps[0]!)));
    const progress = updates.map((u) => u.progress);
    expect(progress).to.deep.equal([...progress].sort((a, b) => a - b));
    expect(updates.at(-1)).to.deep.equal(done);
    expect(await client.transactions.get(registration.transaction_id)).to.deep.equal(done);
    const result = done.result as { ats_id: number; work_id: string; version: number };
    expect(result.version).to.equal(1);

    // the listing, page by page through the iterator: two more works make three pages of one
    await insertWorks(stack.app.context, org, 2);
    const listed = [];
    for await (const work of client.works.list({ network: 'testnet', first: 1 })) listed.push(work);
    expect(listed).to.have.length(3);
    expect(new Set(listed.map((w) => w.id)).size).to.equal(3);
    const mine = listed.find((w) => w.ats_id === result.ats_id)!;
    expect(mine).to.include({ id: result.work_id, title: 'A4 for One Second', latest_version: 1, asset_filename: 'a4.wav' });
    const pages = [];
    for await (const page of client.works.list({ network: 'testnet', first: 2 }).pages()) pages.push(page);
    expect(pages.map((p) => p.works.length)).to.deep.equal([2, 1]);
    expect(pages[0]!.total_count).to.equal(3);

    // a metadata-only version, then one with new audio sent as a stream
    const v2 = await client.works.addVersion(result.ats_id, {
      network: 'testnet',
      creators: [...creators, { full_name: 'Charles Babbage', roles: { arranger: true } }],
    });
    expect((await client.transactions.wait(v2.transaction_id)).status).to.equal('finalized');
    const newAudio = sineWav(2);
    const v3 = await client.works.addVersion(
      result.ats_id,
      { network: 'testnet', filename: 'a4-long.wav', creators },
      Readable.from([newAudio.subarray(0, 1000), newAudio.subarray(1000)]),
      { contentLength: newAudio.length },
    );
    const v3done = await client.transactions.wait(v3.transaction_id);
    expect(v3done.status).to.equal('finalized');
    expect((v3done.result as { version: number }).version).to.equal(3);

    const detail = await client.works.get(result.ats_id);
    expect(detail).to.include({
      id: result.work_id,
      network: 'testnet',
      versions_count: 3,
      latest_version: 3,
      asset_filename: 'a4-long.wav',
    });
    const versions = await client.works.versions.list(result.ats_id, { network: 'testnet' });
    expect(versions.versions.map((v) => v.version)).to.deep.equal([1, 2, 3]);
    expect((await client.works.creators(result.ats_id, { version: 2 })).creators.map((c) => c.full_name)).to.deep.equal([
      'Ada Lovelace',
      'Charles Babbage',
    ]);

    // downloads: each version's own audio, byte for byte, and a PDF certificate
    const download = async (url: string) => Buffer.from(await (await fetch(url)).arrayBuffer());
    expect((await download((await client.works.downloads.audio(result.work_id, { version: 1 })).url)).equals(audio)).to.equal(true);
    expect((await download((await client.works.downloads.audio(result.work_id)).url)).equals(newAudio)).to.equal(true);
    const pdf = await download((await client.works.downloads.certificate(result.work_id)).url);
    expect(pdf.subarray(0, 5).toString()).to.equal('%PDF-');
  });

  it('without a WebSocket, waits by polling, reporting the changes it sees', async () => {
    const key = await createKey(stack.app.context, await createOrg(stack.app.context));
    const client = createClient({ baseUrl: stack.app.url, token: key.token });
    const { transaction_id } = await client.works.register(
      { network: 'testnet', title: 'Polled', filename: 'p.wav', creators: [{ full_name: 'Grace Hopper', roles: { author: true } }] },
      sineWav(1),
    );
    const updates: Transaction[] = [];
    const done = await client.transactions.wait(transaction_id, { onUpdate: (tx) => updates.push(tx), pollIntervalMs: 50 });
    expect(done.status).to.equal('finalized');
    expect(updates.at(-1)).to.deep.equal(done);
    // each report is a change
    for (let i = 1; i < updates.length; i++) expect(updates[i]).to.not.deep.equal(updates[i - 1]);
  });

  it('throws typed errors with the envelope’s code, message, request_id and details', async () => {
    const key = await createKey(stack.app.context, await createOrg(stack.app.context), ['works:read']);
    const requestIds: string[] = [];
    const client = createClient({
      baseUrl: stack.app.url,
      token: key.token,
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        requestIds.push(response.headers.get('x-request-id')!);
        return response;
      },
    });
    const notFound = await client.transactions.get(randomUUID()).catch((err: unknown) => err);
    expect(notFound).to.be.instanceOf(WorksApiError);
    expect(notFound).to.include({ status: 404, code: 'common.not_found', requestId: requestIds.at(-1), attempts: 1 });

    const scope = await client.works.prepare(randomUUID()).catch((err: unknown) => err);
    expect(scope)
      .to.be.instanceOf(WorksApiError)
      .and.include({ status: 403, code: 'auth.insufficient_scope', requestId: requestIds.at(-1) });

    const writer = createClient({
      baseUrl: stack.app.url,
      token: (await createKey(stack.app.context, await createOrg(stack.app.context))).token,
    });
    const invalid = (await writer.works
      .init({ network: 'testnet', title: 'x', filename: 'a/b.wav', creators: [{ full_name: 'A', roles: { author: true }, ipi: '12' }] })
      .catch((err: unknown) => err)) as WorksApiError;
    expect(invalid).to.be.instanceOf(WorksApiError).and.include({ status: 422, code: 'common.validation_failed' });
    expect(invalid.requestId).to.be.a('string').that.is.not.empty;
    expect(invalid.details).to.be.an('array').that.is.not.empty;
    expect(invalid.details![0]).to.have.keys('path', 'message');
  });

  it('issues sessions, whose client reads its ref’s works only; an admin manages keys', async () => {
    const org = await createOrg(stack.app.context);
    const admin = createClient({ baseUrl: stack.app.url, token: await adminToken({ organizationId: org }) });
    const created = await admin.apiKeys.create(org, { name: 'partner backend', scopes: ['works:read', 'works:register'] });
    issuedSecrets.add(created.token).add(created.webhook_secret);
    expect(created.token).to.match(/^wrk_live_/);
    expect((await admin.apiKeys.list(org)).map((k) => k.id)).to.deep.equal([created.id]);

    await insertWorks(stack.app.context, org, 1, { externalUserRef: 'user-1' });
    await insertWorks(stack.app.context, org, 2, { externalUserRef: 'user-2' });
    const partner = createClient({ baseUrl: stack.app.url, token: created.token });
    const session = await partner.sessions.create('user-1');
    issuedSecrets.add(session.session_token);
    const endUser = createClient({ baseUrl: stack.app.url, token: session.session_token });
    const seen = [];
    for await (const work of endUser.works.list()) seen.push(work);
    expect(seen).to.have.length(1);

    await admin.apiKeys.revoke(org, created.id);
    await admin.apiKeys.revoke(org, created.id); // 204 again
    const refused = await partner.sessions.create('user-1').catch((err: unknown) => err);
    expect(refused).to.be.instanceOf(WorksApiError).and.include({ status: 401, code: 'auth.unauthorized' });
  });
});
