import { S3Client, HeadBucketCommand } from '@aws-sdk/client-s3';
import type { Config } from '../config';

export interface Storage {
  readonly client: S3Client;
  readonly bucket: string;
}

export function createStorage(s3: Config['s3']): Storage {
  const client = new S3Client({
    region: s3.region,
    endpoint: s3.endpoint,
    forcePathStyle: s3.forcePathStyle,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    // Presigned PUTs are sent by partners with plain HTTP clients: no checksum headers may be required.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 2,
  });
  return { client, bucket: s3.bucket };
}

export async function pingStorage(storage: Storage): Promise<void> {
  await storage.client.send(new HeadBucketCommand({ Bucket: storage.bucket }), { abortSignal: AbortSignal.timeout(3000) });
}
