import path from 'node:path';
import { freePort } from './net';

export interface S3Handle {
  readonly endpoint: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  stop(): Promise<void>;
}

/**
 * s3rver, a real S3 protocol server that checks SigV4 signatures and presigned-URL expiry, storing
 * objects under `dataDir/s3`. Its built-in account is S3RVER / S3RVER.
 */
export async function startS3rver(dataDir: string, bucket: string, port?: number): Promise<S3Handle> {
  const { default: S3rver } = await import('s3rver');
  const server = new S3rver({
    address: '127.0.0.1',
    port: port ?? (await freePort()),
    silent: true,
    directory: path.join(dataDir, 's3'),
    configureBuckets: [{ name: bucket, configs: [] }],
  });
  const address = (await server.run()) as { port: number };
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    stop: () => server.close(),
  };
}
