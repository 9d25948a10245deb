import { randomBytes, webcrypto } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import { verifyWebhook, WebhookVerificationError, type WebhookEvent, type WebhookHeaders } from '../src/webhooks';
import { useStack } from '../../test/helpers/workers';
import { WebhookReceiver, type Received } from '../../test/helpers/receiver';
import { createKey, createOrg, type TestKey } from '../../test/helpers/factories';
import { addVersion, creator, register } from '../../test/helpers/registration';
import { deliverEvent } from '../../test/helpers/deliveries';

/** The reason `fn` threw a WebhookVerificationError with, or a failure if it threw nothing or something else. */
function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof WebhookVerificationError) return err.reason;
    throw err;
  }
  throw new Error('expected a WebhookVerificationError, nothing was thrown');
}

/** HMAC-SHA256 by WebCrypto: an implementation independent of the library's node:crypto createHmac. */
async function independentSignature(secretBase64: string, t: number | string, body: Uint8Array): Promise<string> {
  const key = await webcrypto.subtle.importKey('raw', Buffer.from(secretBase64, 'base64'), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
  ]);
  const message = Buffer.concat([Buffer.from(`${t}.`), body]);
  return Buffer.from(await webcrypto.subtle.sign('HMAC', key, message)).toString('hex');
}

const signedAt = (hook: Received) => Number(/t=(\d+)/.exec(String(hook.headers['x-service-signature']))![1]);
const at = (unixSeconds: number) => new Date(unixSeconds * 1000);

describe('sdk: verifyWebhook (docs/api.md#headers-and-signature)', function () {
  this.timeout(120_000);

  describe('a real delivery from the service', () => {
    const stack = useStack({ env: { REDIS_PREFIX: `sdk_webhooks_${Date.now()}` } });
    let receiver: WebhookReceiver;
    let key: TestKey;
    let hook: Received;
    let transactionId: string;

    before(async () => {
      receiver = await new WebhookReceiver().start();
      const org = await createOrg(stack.app.context, 1000);
      key = await createKey(stack.app.context, org, ['works:register', 'works:update'], receiver.url);
      const registered = await register(stack.app.url, key.token);
      expect(registered.confirm.status).to.equal(202);
      transactionId = registered.confirm.body.transaction_id;
      [hook] = (await receiver.waitFor(1, 110_000)) as [Received];
    });
    after(() => receiver?.stop());

    it('verifies it and returns the typed event, from Node, Fetch and plain-record headers alike', () => {
      const event: WebhookEvent = verifyWebhook(Buffer.from(hook.raw), hook.headers, key.webhookSecret);
      expect(event.event).to.equal('work_registered');
      expect(event).to.deep.equal(JSON.parse(hook.raw));
      expect(event.transaction_id).to.equal(transactionId);
      if (event.event !== 'work_registered') throw new Error('narrowing');
      expect(event.ats_id).to.be.a('number');

      const fetchHeaders = new Headers(Object.entries(hook.headers).map(([k, v]) => [k, String(v)]));
      expect(verifyWebhook(hook.raw, fetchHeaders, key.webhookSecret)).to.deep.equal(event);
      const shouted: WebhookHeaders = { 'X-SERVICE-SIGNATURE': String(hook.headers['x-service-signature']) };
      expect(verifyWebhook(hook.raw, shouted, key.webhookSecret)).to.deep.equal(event);
    });

    it('verifies the service’s work_updated and work_failed deliveries too, typed by their event', async () => {
      const registered = verifyWebhook(hook.raw, hook.headers, key.webhookSecret);
      if (registered.event !== 'work_registered') throw new Error(`expected work_registered, got ${registered.event}`);
      const version = await addVersion(stack.app.url, key.token, registered.ats_id, { network: 'testnet', creators: [creator()] });
      expect(version.confirm.status).to.equal(202);
      const updatedHook = (await receiver.waitFor(2, 110_000))[1]!;
      const updated = verifyWebhook(updatedHook.raw, updatedHook.headers, key.webhookSecret);
      if (updated.event !== 'work_updated') throw new Error(`expected work_updated, got ${updated.event}`);
      expect(updated).to.deep.include({ ats_id: registered.ats_id, version: 2, transaction_id: version.confirm.body.transaction_id });

      const failure = await deliverEvent(stack.app.context, receiver.url);
      const failedHook = (await receiver.waitFor(3, 60_000))[2]!;
      const failed = verifyWebhook(failedHook.raw, failedHook.headers, failure.key.webhookSecret);
      if (failed.event !== 'work_failed') throw new Error(`expected work_failed, got ${failed.event}`);
      expect(failed).to.deep.include({ transaction_id: failure.transactionId, ats_id: null });
      expect(failed.reason).to.be.a('string');
      // each key signs with its own secret
      expect(reasonOf(() => verifyWebhook(failedHook.raw, failedHook.headers, key.webhookSecret))).to.equal('signature_mismatch');
    });

    it('refuses a tampered body: signature_mismatch', () => {
      const tampered = hook.raw.replace(
        transactionId,
        transactionId.replace(/^./, (c) => (c === '0' ? '1' : '0')),
      );
      expect(tampered).to.not.equal(hook.raw);
      expect(reasonOf(() => verifyWebhook(tampered, hook.headers, key.webhookSecret))).to.equal('signature_mismatch');
      expect(reasonOf(() => verifyWebhook(hook.raw + ' ', hook.headers, key.webhookSecret))).to.equal('signature_mismatch');
    });

    it('refuses a stale or future timestamp beyond the tolerance, and accepts one at its edge', () => {
      const t = signedAt(hook);
      expect(reasonOf(() => verifyWebhook(hook.raw, hook.headers, key.webhookSecret, { now: at(t + 301) }))).to.equal(
        'timestamp_out_of_tolerance',
      );
      expect(reasonOf(() => verifyWebhook(hook.raw, hook.headers, key.webhookSecret, { now: at(t - 301) }))).to.equal(
        'timestamp_out_of_tolerance',
      );
      expect(verifyWebhook(hook.raw, hook.headers, key.webhookSecret, { now: at(t + 300) }).transaction_id).to.equal(transactionId);
      expect(verifyWebhook(hook.raw, hook.headers, key.webhookSecret, { now: at(t - 300) }).transaction_id).to.equal(transactionId);
      const options = { now: at(t + 61), toleranceSeconds: 60 };
      expect(reasonOf(() => verifyWebhook(hook.raw, hook.headers, key.webhookSecret, options))).to.equal('timestamp_out_of_tolerance');
    });

    it('refuses the delivery under another key’s secret: signature_mismatch', () => {
      const otherSecret = randomBytes(32).toString('base64');
      expect(reasonOf(() => verifyWebhook(hook.raw, hook.headers, otherSecret))).to.equal('signature_mismatch');
    });

    it('refuses a delivery without its signature header (missing_header) or with a mangled one (malformed_signature)', () => {
      const { 'x-service-signature': signature, ...rest } = hook.headers;
      expect(signature).to.be.a('string');
      expect(reasonOf(() => verifyWebhook(hook.raw, rest, key.webhookSecret))).to.equal('missing_header');
      expect(reasonOf(() => verifyWebhook(hook.raw, new Headers(), key.webhookSecret))).to.equal('missing_header');
      for (const mangled of ['', `v1=${'0'.repeat(64)}`, `t=${signedAt(hook)}`, `t=12x,v1=${'0'.repeat(64)}`, `t=1,v1=abc`]) {
        expect(
          reasonOf(() => verifyWebhook(hook.raw, { ...rest, 'x-service-signature': mangled }, key.webhookSecret)),
          mangled,
        ).to.equal('malformed_signature');
      }
    });
  });

  describe('properties, against an independent HMAC (WebCrypto)', () => {
    const uuid = fc.uuid();
    const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }));
    const hex32 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => `0x${Buffer.from(b).toString('hex')}`);
    const common = {
      transaction_id: uuid,
      organization_id: uuid,
      api_key_id: uuid,
      external_user_ref: fc.option(text, { nil: null }),
      network: fc.constantFrom('testnet', 'mainnet'),
    };
    const finalized = {
      ...common,
      ats_id: fc.nat(),
      tx_hash: hex32,
      block_number: fc.nat(),
      block_hash: hex32,
      access_code: fc.option(fc.constant(`atc_${'ab'.repeat(32)}`), { nil: null }),
      explorer_url: fc.webUrl(),
      finalized_at: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
    };
    const event: fc.Arbitrary<WebhookEvent> = fc.oneof(
      fc.record({ event: fc.constant('work_registered' as const), ...finalized }),
      fc.record({ event: fc.constant('work_updated' as const), ...finalized, version: fc.integer({ min: 1 }) }),
      fc.record({
        event: fc.constant('work_failed' as const),
        ...common,
        ats_id: fc.option(fc.nat(), { nil: null }),
        reason: text,
        message: text,
        failed_at: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
      }),
    );
    const secret = fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => Buffer.from(b).toString('base64'));
    const t = fc.integer({ min: 1_000_000_000, max: 4_000_000_000 });

    it('accepts any event signed with its secret within the tolerance, among other v1 values, and returns it as sent', async () => {
      await fc.assert(
        fc.asyncProperty(
          event,
          secret,
          t,
          fc.integer({ min: -300, max: 300 }),
          fc.array(fc.uint8Array({ minLength: 32, maxLength: 32 }), { maxLength: 3 }),
          fc.nat(3),
          async (body, key, signed, skew, decoys, position) => {
            const raw = Buffer.from(JSON.stringify(body));
            const values = decoys.map((d) => Buffer.from(d).toString('hex'));
            values.splice(Math.min(position, values.length), 0, await independentSignature(key, signed, raw));
            const header = [`t=${signed}`, ...values.map((v) => `v1=${v}`)].join(',');
            const verified = verifyWebhook(raw, { 'x-service-signature': header }, key, { now: at(signed + skew) });
            expect(verified).to.deep.equal(JSON.parse(raw.toString('utf8')));
          },
        ),
        { numRuns: 200 },
      );
    });

    it('refuses any body whose v1 is not its HMAC under this secret, and any signed time beyond the tolerance', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.uint8Array({ minLength: 0, maxLength: 512 }),
          secret,
          secret,
          t,
          fc.integer({ min: 1, max: 10_000 }),
          fc.nat(),
          async (raw, key, other, signed, beyond, flipAt) => {
            const valid = await independentSignature(key, signed, raw);
            const headers = (v1: string) => ({ 'x-service-signature': `t=${signed},v1=${v1}` });
            const now = at(signed);
            // another secret (unless it is the same key), another time, a flipped bit of the body
            if (Buffer.compare(Buffer.from(other, 'base64'), Buffer.from(key, 'base64')) !== 0) {
              expect(reasonOf(() => verifyWebhook(raw, headers(valid), other, { now }))).to.equal('signature_mismatch');
            }
            const later = `t=${signed + 1},v1=${valid}`;
            expect(reasonOf(() => verifyWebhook(raw, { 'x-service-signature': later }, key, { now }))).to.equal('signature_mismatch');
            if (raw.length > 0) {
              const flipped = Buffer.from(raw);
              flipped[flipAt % raw.length]! ^= 1 << (flipAt % 8);
              expect(reasonOf(() => verifyWebhook(flipped, headers(valid), key, { now }))).to.equal('signature_mismatch');
            }
            // correctly signed: never a signature failure, whatever the bytes; out of time: refused for that
            const reason = reasonOf(() => verifyWebhook(raw, headers(valid), key, { now: at(signed + 300 + beyond) }));
            expect(reason).to.equal('timestamp_out_of_tolerance');
            let inTime: string | undefined;
            try {
              verifyWebhook(raw, headers(valid), key, { now });
            } catch (err) {
              inTime = (err as WebhookVerificationError).reason;
            }
            expect(inTime).to.be.oneOf([undefined, 'malformed_body', 'unknown_event']);
          },
        ),
        { numRuns: 200 },
      );
    });

    it('tells a signed body that is not an event (malformed_body) from a newer event type (unknown_event)', async () => {
      const key = randomBytes(32).toString('base64');
      const signed = Math.floor(Date.now() / 1000);
      const sign = async (raw: string) => ({
        'x-service-signature': `t=${signed},v1=${await independentSignature(key, signed, Buffer.from(raw))}`,
      });
      const cases: [string, string][] = [
        ['not json', 'malformed_body'],
        ['[1,2]', 'malformed_body'],
        ['{"event":"work_registered"}', 'malformed_body'],
        ['{"event":"work_failed","transaction_id":1}', 'malformed_body'],
        ['{"event":"work_archived","transaction_id":"x"}', 'unknown_event'],
      ];
      for (const [raw, reason] of cases) {
        const headers = await sign(raw);
        expect(
          reasonOf(() => verifyWebhook(raw, headers, key)),
          raw,
        ).to.equal(reason);
      }
    });

    it('takes the body as an ArrayBuffer or any view, a Map of headers in any case, and a secret with a final newline', async () => {
      const key = randomBytes(32).toString('base64');
      const signed = Math.floor(Date.now() / 1000);
      const raw = Buffer.from(JSON.stringify({ event: 'work_archived', transaction_id: 'x' }));
      const header = `t=${signed},v1=${await independentSignature(key, signed, raw)}`;
      // the body inside a larger buffer, at an offset: only the view's bytes are the body
      const padded = new Uint8Array(raw.length + 7);
      padded.set(raw, 3);
      const bodies = [
        Uint8Array.from(raw).buffer, // request.arrayBuffer()
        new DataView(padded.buffer, 3, raw.length),
        padded.subarray(3, 3 + raw.length),
        new Uint8ClampedArray(padded.buffer, 3, raw.length),
      ];
      for (const body of bodies) {
        expect(
          reasonOf(() => verifyWebhook(body, { 'x-service-signature': header }, key)),
          body.constructor.name,
        ).to.equal('unknown_event');
      }
      expect(reasonOf(() => verifyWebhook(new DataView(padded.buffer), { 'x-service-signature': header }, key))).to.equal(
        'signature_mismatch',
      );
      for (const name of ['X-Service-Signature', 'x-service-signature', 'X-SERVICE-SIGNATURE']) {
        expect(
          reasonOf(() => verifyWebhook(raw, new Map([[name, header]]), key)),
          name,
        ).to.equal('unknown_event');
      }
      expect(reasonOf(() => verifyWebhook(raw, new Map([['x-other', header]]), key))).to.equal('missing_header');
      for (const mounted of [`${key}\n`, `  ${key}\r\n`, `\t${key} `]) {
        expect(
          reasonOf(() => verifyWebhook(raw, { 'x-service-signature': header }, mounted)),
          JSON.stringify(mounted),
        ).to.equal('unknown_event');
      }
    });

    it('signs over t as received: a t with leading zeros is checked as sent, not as its number', async () => {
      const key = randomBytes(32).toString('base64');
      const signed = Math.floor(Date.now() / 1000);
      const raw = Buffer.from('{"event":"work_archived","transaction_id":"x"}');
      const asSent = `t=00${signed},v1=${await independentSignature(key, `00${signed}`, raw)}`;
      expect(reasonOf(() => verifyWebhook(raw, { 'x-service-signature': asSent }, key))).to.equal('unknown_event');
      // the HMAC of the number's own text does not stand for the text that was sent
      const renumbered = `t=00${signed},v1=${await independentSignature(key, signed, raw)}`;
      expect(reasonOf(() => verifyWebhook(raw, { 'x-service-signature': renumbered }, key))).to.equal('signature_mismatch');
    });

    it('refuses an invalid clock or tolerance with a TypeError rather than skipping the time check', async () => {
      const key = randomBytes(32).toString('base64');
      const signed = Math.floor(Date.now() / 1000) - 10_000; // far outside the tolerance
      const raw = Buffer.from('{}');
      const headers = { 'x-service-signature': `t=${signed},v1=${await independentSignature(key, signed, raw)}` };
      expect(reasonOf(() => verifyWebhook(raw, headers, key))).to.equal('timestamp_out_of_tolerance');
      for (const now of [new Date(Number.NaN), new Date('not a date'), Date.now() as unknown as Date]) {
        expect(() => verifyWebhook(raw, headers, key, { now }), String(now)).to.throw(TypeError, /now/);
      }
      for (const toleranceSeconds of [Number.NaN, Number.POSITIVE_INFINITY, -1]) {
        expect(() => verifyWebhook(raw, headers, key, { toleranceSeconds }), String(toleranceSeconds)).to.throw(
          TypeError,
          /toleranceSeconds/,
        );
      }
    });

    it('refuses a secret that is not base64 and a parsed body with a TypeError: receiver bugs, not bad deliveries', () => {
      const headers = { 'x-service-signature': `t=1,v1=${'0'.repeat(64)}` };
      expect(() => verifyWebhook('{}', headers, 'not base64!')).to.throw(TypeError, /base64/);
      expect(() => verifyWebhook({} as unknown as string, headers, randomBytes(32).toString('base64'))).to.throw(TypeError, /raw/);
    });
  });
});
