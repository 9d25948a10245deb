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
  server.middleware.unshift(writeOnceAudio(server, bucket));
  const address = (await server.run()) as { port: number };
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    stop: () => server.close(),
  };
}

/**
 * Audio objects are write-once: a PUT to an `audio/` key that already exists answers 412, as a bucket with a
 * write-once (conditional write) rule does. This is what makes an upload URL single-use: a second PUT
 * through it can never replace the bytes prepare hashes. See README, "Uploads".
 */
function writeOnceAudio(server: { store?: unknown; context: { store: unknown } }, bucket: string) {
  const store = server.context.store as { existsObject(bucket: string, key: string): Promise<boolean> };
  const prefix = `/${bucket}/audio/`;
  return async (ctx: { method: string; path: string; get(name: string): string; status: number; type: string; body: unknown }, next: () => Promise<void>) => {
    if (ctx.method === 'PUT' && ctx.path.startsWith(prefix) && !ctx.get('x-amz-copy-source')) {
      const key = decodeURIComponent(ctx.path.slice(bucket.length + 2));
      if (await store.existsObject(bucket, key)) {
        ctx.status = 412;
        ctx.type = 'application/xml';
        ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PreconditionFailed</Code><Message>This upload URL has already been used</Message></Error>';
        return;
      }
    }
    await next();
  };
}
