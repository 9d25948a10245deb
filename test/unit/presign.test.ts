import { expect } from 'chai';
import { S3Client, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { PutPresigner } from '../../shared/storage/presign';

describe('PutPresigner', () => {
  const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };
  const signingDate = new Date('2026-11-22T10:00:00Z');
  const cases = [
    {
      name: 'path style, custom endpoint',
      client: new S3Client({ region: 'us-east-1', endpoint: 'http://127.0.0.1:4569', forcePathStyle: true, credentials }),
    },
    { name: 'virtual-hosted AWS', client: new S3Client({ region: 'eu-west-3', credentials }) },
  ];
  for (const { name, client } of cases) {
    it(`makes the URL the SDK's getSignedUrl makes (${name})`, async () => {
      const presigner = new PutPresigner({ client, bucket: 'works-audio' });
      for (const key of [
        'audio/7d1c2a4e-0b7e-4c55-9a51-3f1b2f0c9d11/5b0c8b52-2f0e-4a8e-8f5a-1c2d3e4f5a6b',
        "odd keys/with spaces+(and)!*'",
      ]) {
        const sdk = new URL(
          await getSignedUrl(client, new PutObjectCommand({ Bucket: 'works-audio', Key: key }), { expiresIn: 600, signingDate }),
        );
        const ours = new URL(await presigner.url(key, 600, signingDate));
        expect(ours.origin).to.equal(sdk.origin);
        expect(ours.pathname).to.equal(sdk.pathname);
        expect(Object.fromEntries(ours.searchParams)).to.deep.equal(Object.fromEntries(sdk.searchParams));
      }
    });
  }
});
