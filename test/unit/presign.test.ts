import { expect } from 'chai';
import { S3Client, GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { AwsCredentialIdentity } from '@aws-sdk/types';
import { Presigner, type ObjectMethod } from '../../shared/storage/presign';

describe('Presigner', () => {
  const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };
  const signingDate = new Date('2026-11-22T10:00:00Z');
  const keys = ['audio/7d1c2a4e-0b7e-4c55-9a51-3f1b2f0c9d11/5b0c8b52-2f0e-4a8e-8f5a-1c2d3e4f5a6b', "odd keys/with spaces+(and)!*'~é"];
  // what the service configures (shared/storage/s3.ts): no checksum parameters in presigned URLs
  const options = { requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' } as const;

  const command = (method: ObjectMethod, key: string) => {
    const input = { Bucket: 'works-audio', Key: key };
    return method === 'PUT' ? new PutObjectCommand(input) : method === 'GET' ? new GetObjectCommand(input) : new HeadObjectCommand(input);
  };
  const sdkUrl = (client: S3Client, method: ObjectMethod, key: string, date: Date) =>
    getSignedUrl(client, command(method, key), { expiresIn: 600, signingDate: date });

  /**
   * The URLs must be equal as strings: a partner's HTTP client sends what it is given (the PUT), and the service's
   * own reads and writes (objects.ts) are then what the SDK would have sent.
   */
  async function expectSame(client: S3Client, presigner: Presigner, date = signingDate, methods: ObjectMethod[] = ['PUT', 'GET', 'HEAD']) {
    for (const method of methods) {
      for (const key of keys) expect(await presigner.url(method, key, 600, date), method).to.equal(await sdkUrl(client, method, key, date));
    }
  }

  const cases = [
    {
      name: 'path style, custom endpoint',
      client: new S3Client({ region: 'us-east-1', endpoint: 'http://127.0.0.1:4569', forcePathStyle: true, credentials, ...options }),
    },
    { name: 'virtual-hosted AWS', client: new S3Client({ region: 'eu-west-3', credentials, ...options }) },
    {
      name: 'temporary credentials (a session token)',
      client: new S3Client({ region: 'eu-west-3', credentials: { ...credentials, sessionToken: 'FwoGZXIvYXdzE/+=token' }, ...options }),
    },
    // a client left with the SDK's default checksums (not the service's): its PUT parameters are kept
    { name: 'the SDK default checksum parameters', client: new S3Client({ region: 'us-east-1', credentials }), methods: ['PUT' as const] },
  ];
  for (const { name, client, methods } of cases) {
    it(`makes the URL the SDK's getSignedUrl makes (${name})`, async () => {
      await expectSame(client, new Presigner({ client, bucket: 'works-audio' }), signingDate, methods);
    });
  }

  it('signs with the credentials the client holds now, and with a new day key after midnight', async () => {
    // credentials about to expire: the SDK's provider asks again on every call (as it does for rotating roles)
    const expiration = new Date(Date.now() + 60_000);
    let current: AwsCredentialIdentity = { ...credentials, expiration };
    const client = new S3Client({ region: 'eu-west-3', credentials: async () => current, ...options });
    const presigner = new Presigner({ client, bucket: 'works-audio' });
    await expectSame(client, presigner);
    current = { accessKeyId: 'AKIDROTATED', secretAccessKey: 'rotated/secret+key', sessionToken: 'rotated', expiration };
    await expectSame(client, presigner);
    // within the same second, only the session token, then only the secret, changes
    current = { ...current, sessionToken: 'rotated-again' };
    await expectSame(client, presigner);
    current = { ...current, secretAccessKey: 'rotated/secret+key+again' };
    await expectSame(client, presigner);
    await expectSame(client, presigner, new Date('2026-11-23T00:00:01Z'));
    const url = new URL(await presigner.url('GET', keys[0]!, 600, signingDate));
    expect(url.searchParams.get('X-Amz-Credential')).to.equal('AKIDROTATED/20261122/eu-west-3/s3/aws4_request');
  });

  it('signs URLs of other seconds, lives and methods, in any order, as the SDK does', async () => {
    const { client } = cases[0]!;
    const presigner = new Presigner({ client, bucket: 'works-audio' });
    const later = new Date(signingDate.getTime() + 1500);
    const calls: [ObjectMethod, number, Date][] = [
      ['PUT', 600, signingDate],
      ['PUT', 60, signingDate],
      ['GET', 600, signingDate],
      ['PUT', 600, later],
      ['PUT', 600, signingDate],
      ['HEAD', 60, later],
    ];
    for (const [method, life, date] of calls) {
      const sdk = await getSignedUrl(client, command(method, keys[1]!), { expiresIn: life, signingDate: date });
      expect(await presigner.url(method, keys[1]!, life, date), `${method} ${life} s at ${date.toISOString()}`).to.equal(sdk);
    }
  });

  it('refuses a life SigV4 cannot sign', async () => {
    const presigner = new Presigner({ client: cases[0]!.client, bucket: 'works-audio' });
    for (const expiresIn of [0, -1, 1.5, 7 * 24 * 3600 + 1]) {
      const error = await presigner.url('PUT', keys[0]!, expiresIn).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(error, String(expiresIn)).to.be.instanceOf(RangeError);
    }
  });
});
