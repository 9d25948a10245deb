import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { TestApp } from '../helpers/app';
import { useStack } from '../helpers/workers';
import { createKey, createOrg } from '../helpers/factories';
import { insertEndedTransaction } from '../helpers/deliveries';
import { accessCodeAad, recordEvent, type NewEvent } from '../../shared/webhooks/service';

describe("an outcome's event and its delivery", function () {
  this.timeout(60_000);
  const stack = useStack({ env: { REDIS_PREFIX: `events_${Date.now()}` }, queues: [] });
  let app: TestApp;
  before(() => ({ app } = stack));

  /** Records a work_registered event of a new transaction of `key`, counting the statements recordEvent sent. */
  async function record(organizationId: string, apiKeyId: string) {
    const transactionId = randomUUID();
    const confirmedAt = new Date(Date.now() - 5_000);
    const event: NewEvent = {
      transactionId,
      organizationId,
      apiKeyId,
      type: 'work_registered',
      payload: { event: 'work_registered', transaction_id: transactionId, title: 'Ünïcode “title”', ats_id: 7 },
      accessCode: `atc_${'ab'.repeat(32)}`,
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      confirmedAt,
    };
    // the statements of this SQL transaction only (knex tags each with its transaction's id), from recordEvent's start
    const sent: { tx?: string; sql: string }[] = [];
    const log = (q: { __knexTxId?: string; sql: string }) => sent.push({ tx: q.__knexTxId, sql: q.sql });
    let from = 0;
    app.context.db.on('query', log);
    const recorded = await app.context.db
      .transaction(async (trx) => {
        await insertEndedTransaction(trx, { id: transactionId, organizationId, apiKeyId, status: 'finalized' });
        from = sent.length;
        return recordEvent(trx, app.context.box, event);
      })
      .finally(() => app.context.db.off('query', log));
    const tx = sent.find((q) => q.sql.startsWith('insert into "transactions"'))!.tx;
    expect(tx).to.be.a('string');
    const statements = sent.slice(from).filter((q) => q.tx === tx && q.sql !== 'COMMIT;').length;
    const row = await app.context.db('events').where({ transaction_id: transactionId }).first();
    const deliveries = await app.context.db('webhook_deliveries').where({ event_id: row.id });
    // read, then gone: a worker of a later test would otherwise find the delivery due in the shared database
    await app.context.db.transaction(async (trx) => {
      await trx('webhook_deliveries').where({ event_id: row.id }).delete();
      await trx('events').where({ id: row.id }).delete();
      await trx('transactions').where({ id: transactionId }).delete();
    });
    return { event, recorded, row, deliveries, statements };
  }

  it('records the event and, for a key with a webhook URL, its delivery to that URL, in one statement', async () => {
    const organizationId = await createOrg(app.context, 0);
    const url = 'https://receiver.example.test/hooks?a=1';
    const key = await createKey(app.context, organizationId, ['works:register'], url);
    const { event, recorded, row, deliveries, statements } = await record(organizationId, key.id);

    expect(statements).to.equal(1);
    expect(row).to.include({
      organization_id: organizationId,
      api_key_id: key.id,
      type: 'work_registered',
      traceparent: event.traceparent,
    });
    expect(row.payload).to.deep.equal(event.payload);
    expect(row.confirmed_at.getTime()).to.equal(event.confirmedAt.getTime());
    expect(deliveries).to.have.length(1);
    // the access code, sealed for this event, is kept on its delivery (the one reader of it), not on the event
    expect(app.context.box.open(deliveries[0].sealed_access_code, accessCodeAad(row.id)).toString()).to.equal(event.accessCode);
    expect(row).not.to.have.property('sealed_access_code');
    expect(deliveries[0]).to.include({ id: recorded!.id, api_key_id: key.id, url, status: 'pending' });
    expect(recorded!.labels).to.include({
      organizationId,
      transactionId: event.transactionId,
      event: 'work_registered',
      host: 'receiver.example.test',
    });
  });

  it('records the event and no delivery for a key without a webhook URL', async () => {
    const organizationId = await createOrg(app.context, 0);
    const key = await createKey(app.context, organizationId, ['works:register'], null);
    const { recorded, row, deliveries, statements } = await record(organizationId, key.id);

    expect(statements).to.equal(1);
    expect(recorded).to.equal(null);
    expect(row).to.include({ api_key_id: key.id, type: 'work_registered' });
    expect(deliveries).to.have.length(0);
    // nobody could be sent its access code: no decryptable copy of it is kept anywhere (only the work's SHA-256)
    expect(row).not.to.have.property('sealed_access_code');
    expect(
      Object.values(row).filter((v) => typeof v === 'string' && v.startsWith('v1.')),
      'a sealed value',
    ).to.deep.equal([]);
  });
});
