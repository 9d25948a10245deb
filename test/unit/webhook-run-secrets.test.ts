import { expect } from 'chai';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { SecretBox } from '../../shared/crypto/secret-box';
import { webhookSecretAad } from '../../shared/api-keys/service';
import { RunSecrets, withRunSecrets } from '../../shared/webhooks/delivery';
import type { Delivery } from '../../shared/webhooks/repo';

/** A box that keeps every plaintext it opened, to count the opens and see them wiped. */
class CountingBox extends SecretBox {
  readonly opened: Buffer[] = [];
  override open(sealed: string, associatedData: string): Buffer {
    const plain = super.open(sealed, associatedData);
    this.opened.push(plain);
    return plain;
  }
}

describe('RunSecrets: a job run opens each key webhook secret once, and wipes it', () => {
  const box = new CountingBox(randomBytes(32));
  const key = (secret = randomBytes(32)) => {
    const apiKeyId = randomUUID();
    return { apiKeyId, secret, sealed: box.seal(secret, webhookSecretAad(apiKeyId)) };
  };
  const deliveryOf = (k: { apiKeyId: string; sealed: string }) => ({ apiKeyId: k.apiKeyId, sealedWebhookSecret: k.sealed }) as Delivery;
  const expected = (secret: Buffer, body: string, t: number) =>
    `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')}`;
  beforeEach(() => box.opened.splice(0));

  it('signs each delivery with its own key secret, opening each key once in a run', () => {
    const [a, b] = [key(), key()];
    const secrets = new RunSecrets(box);
    const signed = [a, a, b, a, b].map((k, i) => [k, secrets.sign(deliveryOf(k), `body ${i}`, 1_700_000_000 + i)] as const);
    signed.forEach(([k, signature], i) => expect(signature).to.equal(expected(k.secret, `body ${i}`, 1_700_000_000 + i)));
    expect(box.opened).to.have.length(2);
  });

  it('never signs with a secret sealed for another key, even one already opened in the run', () => {
    const a = key();
    const secrets = new RunSecrets(box);
    secrets.sign(deliveryOf(a), 'x', 1);
    // a's ciphertext copied onto another key's row does not open under that key's associated data
    expect(() => secrets.sign({ ...deliveryOf(a), apiKeyId: randomUUID() }, 'x', 1)).to.throw();
  });

  it('zeroes what it opened when the run ends, signs nothing after, and opens afresh in the next run', async () => {
    const a = key();
    const first = await withRunSecrets(box, undefined, async (secrets) => {
      secrets.sign(deliveryOf(a), 'x', 1);
      expect(box.opened[0]!.equals(a.secret)).to.equal(true);
      return secrets;
    });
    expect(box.opened[0]!.every((byte) => byte === 0)).to.equal(true);
    // a late attempt of a run that ended opens nothing that would outlive it
    expect(() => first.sign(deliveryOf(a), 'late', 2)).to.throw(/wiped/);
    expect(box.opened).to.have.length(1);
    await withRunSecrets(box, undefined, async (secrets) => secrets.sign(deliveryOf(a), 'x', 1));
    expect(box.opened).to.have.length(2);
  });

  it("uses a run's given secrets as they are, and leaves wiping them to their run", async () => {
    const a = key();
    const run = new RunSecrets(box);
    await withRunSecrets(box, run, async (secrets) => {
      expect(secrets).to.equal(run);
      secrets.sign(deliveryOf(a), 'x', 1);
    });
    expect(box.opened[0]!.equals(a.secret), 'still open: the run has not ended').to.equal(true);
    run.wipe();
    expect(box.opened[0]!.every((byte) => byte === 0)).to.equal(true);
  });
});
