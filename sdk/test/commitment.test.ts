import { createCipheriv, createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import fc from 'fast-check';
import { computeCommitment, type AudioSource, type Creator } from '../src/commitment';
import { useStack } from '../../test/helpers/workers';
import { createKey, createOrg } from '../../test/helpers/factories';
import { quote } from '../../test/helpers/registration';

/** ISO 7064 Mod 11-2, the ISNI's check character (from the standard, as the API checks it). */
function isniCheck(first15: string): string {
  let total = 0;
  for (const digit of first15) total = (total + Number(digit)) * 2;
  const result = (12 - (total % 11)) % 11;
  return result === 10 ? 'X' : String(result);
}

/** `size` deterministic pseudo-random bytes from `seed` (AES-CTR over zeros). */
function audioBytes(seed: number, size: number): Buffer<ArrayBuffer> {
  const key = createHash('sha256').update(`audio ${seed}`).digest().subarray(0, 16);
  const cipher = createCipheriv('aes-128-ctr', key, Buffer.alloc(16));
  return Buffer.concat([cipher.update(Buffer.alloc(size)), cipher.final()]);
}

type Delivery = 'bytes' | 'node-stream' | 'web-stream' | 'async-generator';

/** The same bytes as a Buffer, a Node Readable, a web ReadableStream or an async generator, in chunks of `chunk`. */
function source(bytes: Buffer, delivery: Delivery, chunk: number): AudioSource {
  const chunks = Array.from({ length: Math.ceil(bytes.length / chunk) }, (_, i) => bytes.subarray(i * chunk, (i + 1) * chunk));
  if (delivery === 'node-stream') return Readable.from(chunks);
  if (delivery === 'web-stream') {
    let next = 0;
    const stream = new ReadableStream<Uint8Array>({ pull: (c) => (next < chunks.length ? c.enqueue(chunks[next++]!) : c.close()) });
    return stream as unknown as AsyncIterable<Uint8Array>; // Node's web streams are async iterable; its types omit it
  }
  if (delivery === 'async-generator') {
    return (async function* () {
      for (const c of chunks) {
        await new Promise((resolve) => setImmediate(resolve));
        yield c;
      }
    })();
  }
  return bytes;
}

// Unicode the service must take as given: astral characters, combining marks, scripts of every width.
const ASTRAL_AND_COMBINING = ['𝄞', '🎻', '👩🏽‍🎤', 'e\u0301', 'n\u0303', 'Å', '\u0915\u094D\u0937', '漢字', 'ß', '\u05D0\u05B8'];
const PADDING = [' ', '\t', '\n', '\u00A0', '\u3000', '\uFEFF', '\u2028'];
const text = (max: number) =>
  fc
    .tuple(
      fc.oneof(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.string({ unit: 'grapheme-composite', maxLength: 20 })),
      fc.array(fc.constantFrom(...ASTRAL_AND_COMBINING), { maxLength: 4 }),
      fc.string({ unit: 'grapheme-ascii', maxLength: 20 }),
    )
    .map(([a, b, c]) => `${a}${b.join('')}${c}`.replace(/\u0000/g, ''))
    .filter((s) => s.trim().length > 0 && [...s].length <= max);
const padded = (inner: fc.Arbitrary<string>) =>
  fc
    .tuple(fc.array(fc.constantFrom(...PADDING), { maxLength: 3 }), inner, fc.array(fc.constantFrom(...PADDING), { maxLength: 3 }))
    .map(([l, s, r]) => `${l.join('')}${s}${r.join('')}`);

const role = fc.option(fc.boolean(), { nil: undefined });
const creator: fc.Arbitrary<Creator> = fc
  .record(
    {
      // a creator's name is encoded untrimmed: padding included
      full_name: padded(text(290)),
      email: fc.stringMatching(/^[a-z0-9][a-z0-9_+-]{0,15}@[a-z0-9]{1,12}\.(test|example|org)$/),
      roles: fc
        .record({ author: role, composer: role, arranger: role, adapter: role })
        .filter((r) => Object.values(r).some((v) => v === true)),
      ipi: fc.stringMatching(/^[0-9]{9,11}$/),
      isni: fc.stringMatching(/^[0-9]{15}$/).map((d) => d + isniCheck(d)),
    },
    { requiredKeys: ['full_name', 'roles'] },
  )
  .map((c) => JSON.parse(JSON.stringify(c)) as Creator); // roles left undefined are absent, as on the wire

const metadata = fc.record({
  title: padded(text(300)),
  creators: fc.oneof(
    fc.array(creator, { minLength: 1, maxLength: 1 }),
    fc.array(creator, { minLength: 32, maxLength: 32 }),
    fc.array(creator, { minLength: 2, maxLength: 31 }),
  ),
  audio: fc.record({
    seed: fc.nat(),
    size: fc.oneof(
      fc.constant(1),
      fc.integer({ min: 2, max: 4096 }),
      fc.integer({ min: 60_000, max: 70_000 }),
      fc.integer({ min: 1, max: 2_500_000 }),
    ),
    delivery: fc.constantFrom<Delivery>('bytes', 'node-stream', 'web-stream', 'async-generator'),
    chunk: fc.integer({ min: 1, max: 70_000 }),
  }),
});
type Metadata = typeof metadata extends fc.Arbitrary<infer T> ? T : never;

describe('sdk: computeCommitment (docs/api.md#the-commitment)', function () {
  this.timeout(600_000);

  it('gives the pinned vector of an independent implementation (Python hashlib), streamed or not', async () => {
    const audio = Buffer.from(Array.from({ length: 768 }, (_, i) => i % 256));
    const title = '\u3000 Symphonie n° 1 — “Les Machines” 🎻\n';
    const creators: Creator[] = [
      {
        full_name: 'Ada Lovelace',
        email: 'ada@example.test',
        roles: { composer: true, author: true },
        ipi: '00012345678',
        isni: '000000012146438X',
      },
      { full_name: ' Clara Schumann ', roles: { adapter: true, author: false } },
      { full_name: 'Ma\u0301ria 𝄞', email: null, roles: { composer: true, arranger: true }, ipi: null, isni: '0000000121464373' },
    ];
    const expected = {
      commitment: '0xc542f52220c3538496ea962ddd5584d4d1db6b99e36378e4a1af38f1a404868c',
      mediaHash: '0xf3a25aa93aa2fbba28d79260535bbd6a5eb0fc1c24a8b0f04e12b484c1dfe363',
      merkleRoot: '0x395c5607b7bd6306cc25751ab036dcbdcfc2225a3e16302e0204dc36633d7b7c',
    };
    expect(await computeCommitment(audio, title, creators)).to.deep.equal(expected);
    expect(await computeCommitment(new Uint8Array(audio), title, creators)).to.deep.equal(expected);
    for (const delivery of ['node-stream', 'web-stream', 'async-generator'] as const) {
      expect(await computeCommitment(source(audio, delivery, 100), title, creators), delivery).to.deep.equal(expected);
    }
    // what upload takes: an ArrayBuffer, a view at an offset of a larger buffer (only its bytes), a Blob, a File
    const padded = new Uint8Array(audio.length + 9);
    padded.set(audio, 5);
    const asUploaded = {
      ArrayBuffer: Uint8Array.from(audio).buffer,
      DataView: new DataView(padded.buffer, 5, audio.length),
      subarray: padded.subarray(5, 5 + audio.length),
      Blob: new Blob([audio.subarray(0, 300), audio.subarray(300)]),
      File: new File([audio], 'take-3.wav', { type: 'audio/wav' }),
    };
    for (const [kind, input] of Object.entries(asUploaded)) {
      expect(await computeCommitment(input, title, creators), kind).to.deep.equal(expected);
    }
    expect(await computeCommitment(new Blob([audio, Buffer.of(0)]), title, creators)).to.not.deep.equal(expected);
  });

  it('does not normalize Unicode: a title in NFC and in NFD give different commitments', async () => {
    const creators: Creator[] = [{ full_name: 'A', roles: { author: true } }];
    const nfc = 'Été'.normalize('NFC');
    const nfd = nfc.normalize('NFD');
    expect(nfd).to.not.equal(nfc);
    const [composed, decomposed] = await Promise.all([
      computeCommitment(Buffer.of(1), nfc, creators),
      computeCommitment(Buffer.of(1), nfd, creators),
    ]);
    expect(composed.commitment).to.not.equal(decomposed.commitment);
    expect(composed.mediaHash).to.equal(decomposed.mediaHash);
  });

  it('refuses what has no commitment: empty audio, no creator or more than 32, unpaired surrogates', async () => {
    const one: Creator[] = [{ full_name: 'A', roles: { author: true } }];
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => 'resolved',
        (err: Error) => `${err.name}: ${err.message}`,
      );
    expect(await refusal(computeCommitment(Buffer.alloc(0), 't', one))).to.match(/^RangeError: .*empty/);
    expect(await refusal(computeCommitment(Readable.from([]), 't', one))).to.match(/^RangeError: .*empty/);
    expect(await refusal(computeCommitment(new Blob([]), 't', one))).to.match(/^RangeError: .*empty/);
    expect(await refusal(computeCommitment(new ArrayBuffer(0), 't', one))).to.match(/^RangeError: .*empty/);
    expect(await refusal(computeCommitment(Buffer.of(1), 't', []))).to.match(/^RangeError: 1 to 32 creators/);
    expect(await refusal(computeCommitment(Buffer.of(1), 't', Array(33).fill(one[0])))).to.match(/^RangeError: 1 to 32 creators/);
    expect(await refusal(computeCommitment(Buffer.of(1), 'a\uD800b', one))).to.match(/^RangeError: title .*surrogate/);
    expect(await refusal(computeCommitment(Buffer.of(1), 't', [{ full_name: '\uDC00', roles: { author: true } }]))).to.match(
      /^RangeError: creators\[0\]\.full_name .*surrogate/,
    );
  });

  describe("matches the service's quotes for 100 generated metadata sets", () => {
    // the quotes come through the real API; the organization's rate limit must not stop 100 inits
    const stack = useStack({
      env: { REDIS_PREFIX: `sdk_commitment_${Date.now()}`, RATE_LIMIT_PER_SECOND: '1000', RATE_LIMIT_BURST: '1000' },
      queues: ['prepare'],
    });

    it('init → PUT → prepare: the quote’s commitment equals computeCommitment, 5 prepares at a time', async () => {
      const org = await createOrg(stack.app.context, 10_000_000);
      const key = await createKey(stack.app.context, org, ['works:register']);
      const seen: Metadata[] = [];
      const check = async (m: Metadata) => {
        const audio = audioBytes(m.audio.seed, m.audio.size);
        const body = { network: 'testnet', title: m.title, filename: 'generated.wav', creators: m.creators };
        const quoted = await quote(stack.app.url, key.token, body, audio);
        // the quote (docs/api.md#quotes-and-pricing) carries the commitment as 0x + 64 hex
        expect(quoted.prepare.body).to.include({ job_id: quoted.jobId, is_valid: true });
        expect(quoted.prepare.body.commitment).to.match(/^0x[0-9a-f]{64}$/);
        const computed = await computeCommitment(source(audio, m.audio.delivery, m.audio.chunk), m.title, m.creators);
        expect(computed.commitment, `the quote of job ${quoted.jobId}`).to.equal(quoted.prepare.body.commitment);
        expect(computed.mediaHash).to.equal(`0x${createHash('sha256').update(audio).digest('hex')}`);
        seen.push(m);
      };
      await fc.assert(
        fc.asyncProperty(fc.array(metadata, { minLength: 5, maxLength: 5 }), (group) =>
          Promise.all(group.map(check)).then(() => undefined),
        ),
        { numRuns: 20, endOnFailure: true },
      );

      // what the 100 sets covered (each holds for a run of this size with overwhelming odds)
      expect(seen).to.have.length(100);
      const creators = seen.flatMap((m) => m.creators);
      expect(
        seen.some((m) => m.creators.length === 1),
        'a single creator',
      ).to.equal(true);
      expect(
        seen.some((m) => m.creators.length === 32),
        '32 creators',
      ).to.equal(true);
      expect(
        seen.some((m) => m.audio.delivery !== 'bytes' && m.audio.size > m.audio.chunk),
        'audio streamed in several chunks',
      ).to.equal(true);
      expect(
        seen.some((m) => m.audio.size > 1_000_000),
        'audio over 1 MB',
      ).to.equal(true);
      expect(
        seen.some((m) => /[\u{10000}-\u{10FFFF}]/u.test(m.title)),
        'an astral title',
      ).to.equal(true);
      expect(
        seen.some((m) => /\p{M}/u.test(m.title)),
        'a title with combining marks',
      ).to.equal(true);
      expect(
        seen.some((m) => m.title !== m.title.trim()),
        'a title to trim',
      ).to.equal(true);
      for (const field of ['email', 'ipi', 'isni'] as const) {
        expect(
          creators.some((c) => c[field] !== undefined) && creators.some((c) => c[field] === undefined),
          `${field} present and absent`,
        ).to.equal(true);
      }
      expect(new Set(creators.map((c) => JSON.stringify(c.roles))).size, 'role combinations').to.be.greaterThan(10);
    });
  });
});
