import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { CopyObjectCommand, GetObjectCommand, S3ServiceException } from '@aws-sdk/client-s3';
import { createStorage, type Storage } from '../../shared/storage/s3';
import { getObject, headObject, putObject, S3RequestError } from '../../shared/storage/objects';
import { SignatureV4 } from '@smithy/signature-v4';
import { presign } from '../../shared/storage/presign';
import { configWith } from '../helpers/services';

/** The hot paths' object requests (shared/storage/objects.ts), against the test S3 server and against a failing one. */
describe('storage objects: presigned HEAD, GET and PUT', () => {
  let storage: Storage;
  before(() => (storage = createStorage(configWith({}).s3)));

  const failure = (err: unknown) => err as S3RequestError;
  const caught = <T>(promise: Promise<T>) => promise.then(() => expect.fail('expected a refusal'), failure);

  it('stores, describes and reads back an object; a missing one is undefined', async () => {
    const key = `test-objects/${randomUUID()}`;
    const body = randomBytes(70_000);
    expect(await headObject(storage, key)).to.equal(undefined);
    await putObject(storage, key, body, 'application/pdf');
    const head = await headObject(storage, key);
    expect(head?.size).to.equal(body.length);
    expect(head?.etag).to.match(/^"[0-9a-f]{32}"$/);
    const chunks: Buffer[] = [];
    for await (const chunk of await getObject(storage, key, head!.etag)) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(body)).to.equal(true);
  });

  it('is read-after-write consistent: a GET right after a PUT, or during one, reads a whole object', async () => {
    const key = `test-objects/${randomUUID()}`;
    // a plain GET, as the certificate test reads its PDF: no If-Match that an overwrite would fail
    const read = async () => {
      const got = await storage.client.send(new GetObjectCommand({ Bucket: storage.bucket, Key: key }));
      const bytes = Buffer.from(await got.Body!.transformToByteArray());
      // one object's bytes, size and ETag, never one's bytes under another's
      expect(got.ContentLength).to.equal(bytes.length);
      expect(got.ETag).to.equal(`"${createHash('md5').update(bytes).digest('hex')}"`);
      return bytes;
    };
    let before: Buffer | undefined;
    for (let round = 0; round < 30; round++) {
      const body = randomBytes(256 * 1024 + round);
      // readers racing the overwrite see the old object or the new one, whole
      const racing = before ? [read(), read()] : [];
      await putObject(storage, key, body, 'application/pdf');
      for (const seen of await Promise.all(racing))
        expect(seen.equals(before!) || seen.equals(body), `round ${round}, during`).to.equal(true);
      const after = await read();
      expect(after.length, `round ${round}: the bytes just stored`).to.equal(body.length);
      expect(after.equals(body)).to.equal(true);
      before = body;
    }
  });

  it('stores one of two PUTs sent at once to an audio key and refuses the other with 412, as a write-once bucket does', async () => {
    const key = `audio/test-objects/${randomUUID()}`;
    const bodies = [randomBytes(512 * 1024), randomBytes(512 * 1024)];
    const outcomes = await Promise.allSettled(bodies.map((body) => putObject(storage, key, body, 'audio/mpeg')));
    const stored = outcomes.findIndex((o) => o.status === 'fulfilled');
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected').map((o) => failure(o.reason));
    expect(stored).to.not.equal(-1);
    expect(refused.map((err) => [err.status, err.code])).to.deep.equal([[412, 'PreconditionFailed']]);
    const head = await headObject(storage, key);
    expect(head?.etag).to.equal(`"${createHash('md5').update(bodies[stored]!).digest('hex')}"`);
  });

  it('refuses an upload URL sent with an x-amz header it does not sign: no copy of another object, no metadata of its own', async () => {
    const key = `audio/test-objects/${randomUUID()}`;
    const other = `test-objects/${randomUUID()}`;
    await putObject(storage, other, randomBytes(2000), 'audio/mpeg');
    const url = new URL(await presign(storage, 'PUT', key, 60));
    const send = (headers: Record<string, string>, body: Buffer = Buffer.alloc(0)) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(url, { method: 'PUT', headers: { 'Content-Length': String(body.length), ...headers } }, (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, body: text }));
        });
        req.on('error', reject);
        req.end(body);
      });
    const attempts: [Record<string, string>, Buffer | undefined][] = [
      [{ 'x-amz-copy-source': `/${storage.bucket}/${other}` }, undefined],
      [{ 'x-amz-meta-owner': 'someone else' }, randomBytes(100)],
    ];
    for (const [headers, body] of attempts) {
      const answer = await send({ ...headers, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' }, body);
      const [code, unsigned] = [/<Code>(\w+)<\/Code>/, /<HeadersNotSigned>([^<]*)</].map((re) => re.exec(answer.body)?.[1]);
      // S3 takes x-amz-content-sha256 unsigned, and names the headers it refuses
      expect([answer.status, code, unsigned], JSON.stringify(headers)).to.deep.equal([403, 'AccessDenied', Object.keys(headers)[0]]);
    }
    expect(await headObject(storage, key)).to.equal(undefined);
    // the URL itself still works, once
    expect((await send({ 'Content-Type': 'audio/mpeg', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' }, randomBytes(100))).status).to.equal(
      200,
    );
  });

  it('refuses a request signed in its Authorization header that carries an x-amz header the signature leaves out', async () => {
    const source = `test-objects/${randomUUID()}`;
    await putObject(storage, source, randomBytes(500), 'audio/mpeg');
    const { endpoint, accessKeyId, secretAccessKey, region } = configWith({}).s3;
    const signer = new SignatureV4({
      credentials: { accessKeyId, secretAccessKey },
      region,
      service: 's3',
      sha256: storage.client.config.sha256,
      uriEscapePath: false,
      applyChecksum: false,
    });
    const target = new URL(endpoint!);
    const copyOnto = async (key: string, signCopySource: boolean) => {
      const copySource = `/${storage.bucket}/${source}`;
      const headers: Record<string, string> = { host: target.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' };
      if (signCopySource) headers['x-amz-copy-source'] = copySource;
      const signed = await signer.sign({
        method: 'PUT',
        protocol: 'http:',
        hostname: target.hostname,
        port: Number(target.port),
        path: `/${storage.bucket}/${key}`,
        query: {},
        headers,
      } as never);
      const sent = { ...(signed as unknown as { headers: Record<string, string> }).headers, 'x-amz-copy-source': copySource };
      return new Promise<number>((resolve, reject) => {
        const req = http.request(new URL(`/${storage.bucket}/${key}`, endpoint), { method: 'PUT', headers: sent }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.end();
      });
    };
    const key = `test-objects/${randomUUID()}`;
    expect(await copyOnto(key, false), 'the copy source added after signing').to.equal(403);
    expect(await headObject(storage, key)).to.equal(undefined);
    expect(await copyOnto(key, true), 'the copy source signed').to.equal(200);
    expect((await headObject(storage, key))?.size).to.equal(500);
  });

  it('refuses a signed copy onto an audio key that holds an object (write-once), and copies elsewhere as S3 does', async () => {
    const source = `test-objects/${randomUUID()}`;
    const body = randomBytes(3000);
    await putObject(storage, source, body, 'audio/mpeg');
    const audio = `audio/test-objects/${randomUUID()}`;
    await putObject(storage, audio, randomBytes(3000), 'audio/mpeg');
    const copy = (key: string) =>
      storage.client.send(new CopyObjectCommand({ Bucket: storage.bucket, Key: key, CopySource: `${storage.bucket}/${source}` }));
    const refused = await copy(audio).then(
      () => expect.fail('a copy replaced an audio object'),
      (err: S3ServiceException) => err,
    );
    expect([refused.$metadata.httpStatusCode, refused.name]).to.deep.equal([412, 'PreconditionFailed']);
    const elsewhere = `test-objects/${randomUUID()}`;
    await copy(elsewhere);
    expect((await headObject(storage, elsewhere))?.etag).to.equal(`"${createHash('md5').update(body).digest('hex')}"`);
  });

  it("refuses a GET whose ETag no longer matches, with S3's status and code", async () => {
    const key = `test-objects/${randomUUID()}`;
    await putObject(storage, key, randomBytes(10), 'application/octet-stream');
    const err = await caught(getObject(storage, key, '"00000000000000000000000000000000"'));
    expect(err).to.be.instanceOf(S3RequestError);
    expect([err.method, err.status, err.code]).to.deep.equal(['GET', 412, 'PreconditionFailed']);
  });

  describe('against a server that fails', () => {
    let server: http.Server;
    let answers: number[];
    let seen: { method: string; url: string }[];
    let flaky: Storage;
    before(async () => {
      server = http.createServer((req, res) => {
        seen.push({ method: req.method!, url: req.url! });
        req.resume();
        const status = answers.shift() ?? 200;
        if (status === 0) return void req.socket.destroy(); // a connection cut before any answer
        if (status === 200) return void res.writeHead(200, { 'Content-Length': '0', ETag: '"abc"' }).end();
        res.writeHead(status, { 'Content-Type': 'application/xml' });
        res.end(`<?xml version="1.0"?><Error><Code>Code${status}</Code><Message>no</Message></Error>`);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const s3 = configWith({}).s3;
      flaky = createStorage({ ...s3, endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    });
    after(() => new Promise<void>((resolve) => server.close(() => resolve())));
    beforeEach(() => ((answers = []), (seen = [])));

    it('tries a 5xx once more, then answers', async () => {
      answers = [503];
      expect(await headObject(flaky, 'a/b')).to.deep.equal({ size: 0, etag: '"abc"' });
      expect(seen.map((s) => s.method)).to.deep.equal(['HEAD', 'HEAD']);
      expect(seen[1]!.url).to.match(/X-Amz-Signature=[0-9a-f]{64}/);
    });

    it('gives up after the second 5xx, with the status and code', async () => {
      answers = [500, 503];
      const err = await caught(putObject(flaky, 'a/b', Buffer.from('x'), 'text/plain'));
      expect([err.method, err.status, err.code]).to.deep.equal(['PUT', 503, 'Code503']);
      expect(seen).to.have.length(2);
    });

    it('never repeats a 4xx', async () => {
      answers = [403];
      const err = await caught(headObject(flaky, 'a/b'));
      expect([err.status, seen.length]).to.deep.equal([403, 1]);
    });

    it('tries a connection cut before any answer once more', async () => {
      answers = [0];
      expect(await headObject(flaky, 'a/b')).to.deep.equal({ size: 0, etag: '"abc"' });
      expect(seen).to.have.length(2);
      answers = [0, 0];
      const err = await headObject(flaky, 'a/b').then(
        () => expect.fail('expected a refusal'),
        (e: NodeJS.ErrnoException) => e,
      );
      expect(err.code).to.equal('ECONNRESET');
      expect(seen).to.have.length(4);
    });
  });
});
