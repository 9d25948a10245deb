import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { insertBareOrgAndKey, useOwnDatabase } from '../helpers/services';
import { insertEndedTransaction } from '../helpers/deliveries';

const MIGRATION = '20261128000000_access_code_on_delivery.ts';

/**
 * Migration 20261128000000: a sealed access code moves from its event to its delivery. A pending delivery's code
 * goes with it; a delivered one had none left; an event without a delivery (its key had no webhook URL, so
 * nobody could be sent the code) keeps none. On a database of its own, up and back down.
 */
describe('the access-code migration, on a database of its own', () => {
  const ownDb = useOwnDatabase('access_code_migration');

  it('moves a pending delivery’s sealed code onto it, drops one nobody could be sent, and back on the way down', async () => {
    const db = ownDb();
    await db.migrate.latest();
    await db.migrate.down({ name: MIGRATION });
    expect(await db.schema.hasColumn('events', 'sealed_access_code')).to.equal(true);
    expect(await db.schema.hasColumn('webhook_deliveries', 'sealed_access_code')).to.equal(false);

    const { org, key } = await insertBareOrgAndKey(db);
    /** An event with a sealed code and, unless `delivery` is null, its delivery in that state. */
    const eventOf = async (sealed: string | null, delivery: 'pending' | 'delivered' | 'dead' | null) => {
      const transactionId = randomUUID();
      const eventId = randomUUID();
      await db.transaction((trx: Knex.Transaction) =>
        insertEndedTransaction(trx, { id: transactionId, organizationId: org.id, apiKeyId: key.id, status: 'finalized' }),
      );
      await db('events').insert({
        id: eventId,
        transaction_id: transactionId,
        organization_id: org.id,
        api_key_id: key.id,
        type: 'work_registered',
        payload: {},
        sealed_access_code: sealed,
      });
      const deliveryId = randomUUID();
      if (delivery)
        await db('webhook_deliveries').insert({
          id: deliveryId,
          event_id: eventId,
          api_key_id: key.id,
          url: 'https://h.example/',
          status: delivery,
        });
      return { eventId, deliveryId };
    };
    const pending = await eventOf('v1.pending', 'pending');
    const delivered = await eventOf(null, 'delivered');
    const undeliverable = await eventOf('v1.nobody', null);
    // delivered or dead before the codes were cleared on the way (e918803): theirs are not moved either
    const deliveredEarly = await eventOf('v1.delivered-early', 'delivered');
    const deadEarly = await eventOf('v1.dead-early', 'dead');

    await db.migrate.latest();
    expect(await db.schema.hasColumn('events', 'sealed_access_code')).to.equal(false);
    const sealedOf = async (deliveryId: string) =>
      (await db('webhook_deliveries').where({ id: deliveryId }).first('sealed_access_code'))?.sealed_access_code;
    expect(await sealedOf(pending.deliveryId)).to.equal('v1.pending');
    expect(await sealedOf(delivered.deliveryId)).to.equal(null);
    expect(await sealedOf(deliveredEarly.deliveryId)).to.equal(null);
    expect(await sealedOf(deadEarly.deliveryId)).to.equal(null);
    // nowhere else: the only sealed code left is the pending delivery's
    expect(await db('webhook_deliveries').whereNotNull('sealed_access_code').pluck('id')).to.deep.equal([pending.deliveryId]);
    // and from now on a code is only ever on a pending delivery
    const ended = db('webhook_deliveries').where({ id: pending.deliveryId }).update({ status: 'delivered' });
    expect(
      await ended.then(
        () => 'updated',
        (err: { constraint?: string }) => err.constraint,
      ),
    ).to.equal('webhook_deliveries_sealed_only_pending');
    const cleared = await db('webhook_deliveries')
      .where({ id: pending.deliveryId })
      .update({ status: 'delivered', sealed_access_code: null });
    expect(cleared).to.equal(1);
    await db('webhook_deliveries').where({ id: pending.deliveryId }).update({ status: 'pending', sealed_access_code: 'v1.pending' });

    await db.migrate.down({ name: MIGRATION });
    const events = await db('events').select('id', 'sealed_access_code');
    expect(
      Object.fromEntries(events.map((e: { id: string; sealed_access_code: string | null }) => [e.id, e.sealed_access_code])),
    ).to.deep.equal({
      [pending.eventId]: 'v1.pending',
      [delivered.eventId]: null,
      [undeliverable.eventId]: null,
      [deliveredEarly.eventId]: null,
      [deadEarly.eventId]: null,
    });
    expect(await db.schema.hasColumn('webhook_deliveries', 'sealed_access_code')).to.equal(false);
  });
});
