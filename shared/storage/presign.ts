import { PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl, S3RequestPresigner } from '@aws-sdk/s3-request-presigner';
import type { Storage } from './s3';

interface Endpoint {
  readonly protocol: string;
  readonly hostname: string;
  readonly port: number | undefined;
  /** The path before the object key: `/bucket/` (path style) or `/` (virtual-hosted). */
  readonly keyPrefix: string;
  /** Query parameters the SDK adds besides the signature's (x-id). */
  readonly query: Record<string, string>;
  readonly presigner: S3RequestPresigner;
}

/**
 * Presigned PUT URLs of one bucket without running the S3 client's middleware stack per URL. The SDK's
 * getSignedUrl resolves the endpoint and builds the whole command on every call, about 0.25 ms of CPU (a
 * quarter of an init request, `npm run bench -- api`); the endpoint depends only on the bucket, so it is taken
 * once from a URL getSignedUrl made, and each URL is then a single SigV4 presign of the same request the SDK
 * builds. The URLs are the SDK's own (test/unit/presign.test.ts).
 */
export class PutPresigner {
  private endpoint: Promise<Endpoint> | undefined;

  constructor(private readonly storage: Storage) {}

  async url(key: string, expiresIn: number, signingDate?: Date): Promise<string> {
    const endpoint = await (this.endpoint ??= this.resolve().catch((err) => {
      this.endpoint = undefined;
      throw err;
    }));
    const path = endpoint.keyPrefix + key.split('/').map(escapeUri).join('/');
    const request = {
      method: 'PUT',
      protocol: endpoint.protocol,
      hostname: endpoint.hostname,
      port: endpoint.port,
      path,
      query: { ...endpoint.query },
      headers: { host: endpoint.port !== undefined ? `${endpoint.hostname}:${endpoint.port}` : endpoint.hostname },
    };
    const signed = await endpoint.presigner.presign(request as never, { expiresIn, ...(signingDate ? { signingDate } : {}) });
    const query = signed.query as Record<string, string>;
    const search = Object.keys(query)
      .sort()
      .map((k) => `${escapeUri(k)}=${escapeUri(query[k]!)}`)
      .join('&');
    return `${endpoint.protocol}//${request.headers.host}${path}?${search}`;
  }

  /** The endpoint, signing region and service of this bucket, read from one URL the SDK presigned. */
  private async resolve(): Promise<Endpoint> {
    const probe = '__endpoint_probe__';
    const sample = new URL(
      await getSignedUrl(this.storage.client, new PutObjectCommand({ Bucket: this.storage.bucket, Key: probe }), { expiresIn: 60 }),
    );
    if (!sample.pathname.endsWith(`/${probe}`)) throw new Error(`unexpected presigned URL layout: ${sample.pathname}`);
    const [, , region, service] = (sample.searchParams.get('X-Amz-Credential') ?? '').split('/');
    if (!region || !service) throw new Error('presigned URL without a credential scope');
    const query: Record<string, string> = {};
    for (const [k, v] of sample.searchParams) if (!k.startsWith('X-Amz-')) query[k] = v;
    return {
      protocol: sample.protocol,
      hostname: sample.hostname,
      port: sample.port ? Number(sample.port) : undefined,
      keyPrefix: sample.pathname.slice(0, -probe.length),
      query,
      presigner: new S3RequestPresigner({ ...this.storage.client.config, signingName: service, region: async () => region }),
    };
  }
}

/** RFC 3986 escaping, as the SDK escapes object keys and query values. */
function escapeUri(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

const presigners = new WeakMap<Storage, PutPresigner>();

/** A presigned PUT of `key` valid `expiresIn` seconds, with the storage's one presigner. */
export function presignPut(storage: Storage, key: string, expiresIn: number): Promise<string> {
  let presigner = presigners.get(storage);
  if (!presigner) presigners.set(storage, (presigner = new PutPresigner(storage)));
  return presigner.url(key, expiresIn);
}
