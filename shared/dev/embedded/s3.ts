import path from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { S3RequestPresigner } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import { freePort } from './net';
import { consistentStore, type FilesystemStore } from './s3-store';

const ACCESS_KEY_ID = 'S3RVER';
const SECRET_ACCESS_KEY = 'S3RVER';
/** Keys under it are write-once (`writeOnceAudio`, `consistentStore`). */
const AUDIO_PREFIX = 'audio/';
const USED_UPLOAD_URL = 'This upload URL has already been used';

export interface S3Handle {
  readonly endpoint: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  stop(): Promise<void>;
}

/**
 * s3rver, a real S3 protocol server, storing objects under `dataDir/s3`. Its built-in account is
 * S3RVER / S3RVER. It checks presigned-URL expiry but not SigV4 signatures ("unimplemented" in s3rver 3),
 * so presigned requests are verified here first, as S3 does: an upload URL cannot be pointed elsewhere.
 */
export async function startS3rver(dataDir: string, bucket: string, port?: number): Promise<S3Handle> {
  const [{ default: S3rver }, { default: S3Error }] = await Promise.all([import('s3rver'), import('s3rver/lib/models/error.js')]);
  const server = new S3rver({
    address: '127.0.0.1',
    port: port ?? (await freePort()),
    silent: true,
    directory: path.join(dataDir, 's3'),
    configureBuckets: [{ name: bucket, configs: [] }],
  });
  const store = server.context.store as FilesystemStore;
  const writeOnce = (inBucket: string, key: string) => inBucket === bucket && key.startsWith(AUDIO_PREFIX);
  consistentStore(store, { writeOnce, refusal: () => new S3Error('PreconditionFailed', USED_UPLOAD_URL) });
  server.middleware.unshift(writeOnceAudio(store, bucket, writeOnce));
  server.middleware.unshift(conditionalReads());
  server.middleware.unshift(singlePutLimit());
  server.middleware.unshift(verifyPresignedV4());
  const address = (await server.run()) as { port: number };
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    accessKeyId: ACCESS_KEY_ID,
    secretAccessKey: SECRET_ACCESS_KEY,
    stop: () => server.close(),
  };
}

/** An S3 error response, in S3's XML, with its details (element names and their text, XML-safe). */
function s3Error(
  ctx: { status: number; type: string; body: unknown },
  status: number,
  code: string,
  message: string,
  detail: Record<string, string> = {},
): void {
  ctx.status = status;
  ctx.type = 'application/xml';
  const details = Object.entries(detail).map(([name, text]) => `<${name}>${text}</${name}>`);
  ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message>${details.join('')}</Error>`;
}

/**
 * Audio objects are write-once: a PUT to an `audio/` key that already exists answers 412, as a bucket with a
 * write-once (conditional write) rule does. This is what makes an upload URL single-use: a second PUT
 * through it can never replace the bytes prepare hashes. See README, "Uploads". Answered here before the body
 * arrives; a PUT that got past this while another was still streaming is refused by the store, in its key's
 * turn (`consistentStore`).
 */
function writeOnceAudio(store: FilesystemStore, bucket: string, writeOnce: (bucket: string, key: string) => boolean) {
  const prefix = `/${bucket}/`;
  return async (
    ctx: { method: string; path: string; get(name: string): string; status: number; type: string; body: unknown },
    next: () => Promise<void>,
  ) => {
    // a copy onto the key too: nothing may replace what prepare hashes
    if (ctx.method === 'PUT' && ctx.path.startsWith(prefix)) {
      const key = decodeURIComponent(ctx.path.slice(prefix.length));
      if (writeOnce(bucket, key) && (await store.existsObject(bucket, key))) {
        return s3Error(ctx, 412, 'PreconditionFailed', USED_UPLOAD_URL);
      }
    }
    await next();
  };
}

/**
 * A GET or HEAD with `If-Match` answers 412 PreconditionFailed when the object's ETag differs, as S3 does
 * (s3rver ignores the header): prepare pins the GET of an upload to the ETag its HEAD saw.
 */
function conditionalReads() {
  return async (
    ctx: {
      method: string;
      get(name: string): string;
      response: { get(name: string): string };
      status: number;
      type: string;
      body: unknown;
    },
    next: () => Promise<void>,
  ) => {
    await next();
    const wanted = ctx.get('if-match');
    if (!wanted || (ctx.method !== 'GET' && ctx.method !== 'HEAD') || ctx.status !== 200) return;
    if (wanted.split(',').some((etag) => etag.trim() === '*' || etag.trim() === ctx.response.get('etag'))) return;
    (ctx.body as { destroy?: () => void } | undefined)?.destroy?.();
    s3Error(ctx, 412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
  };
}

/** S3's own limit on one PUT (5 GiB), which is what bounds an upload before prepare refuses it (README, "Uploads"). */
export const S3_MAX_PUT_BYTES = 5 * 1024 ** 3;

/**
 * A PUT must say its length, and at most 5 GiB, as S3 requires (411 MissingContentLength, 400
 * EntityTooLarge): s3rver would store whatever streams in.
 */
function singlePutLimit() {
  return async (
    ctx: { method: string; get(name: string): string; status: number; type: string; body: unknown },
    next: () => Promise<void>,
  ) => {
    if (ctx.method === 'PUT' && !ctx.get('x-amz-copy-source')) {
      const length = ctx.get('content-length');
      if (!/^\d+$/.test(length)) return s3Error(ctx, 411, 'MissingContentLength', 'You must provide the Content-Length HTTP header.');
      if (Number(length) > S3_MAX_PUT_BYTES)
        return s3Error(ctx, 400, 'EntityTooLarge', 'Your proposed upload exceeds the maximum allowed size');
    }
    await next();
  };
}

type KoaLike = {
  get(name: string): string;
  headers: Record<string, string | string[] | undefined>;
  method: string;
  path: string;
  host: string;
  hostname: string;
  query: Record<string, string | string[] | undefined>;
  status: number;
  type: string;
  body: unknown;
};

/**
 * Recomputes a presigned request's SigV4 signature (method, host, path, query and the signed date and
 * lifetime it names) with the SDK's own presigner and refuses a mismatch with 403 SignatureDoesNotMatch.
 */
function verifyPresignedV4() {
  const config = new S3Client({ region: 'us-east-1', credentials: { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY } })
    .config;
  const verifyHeader = verifyHeaderV4(config.sha256);
  return async (ctx: KoaLike, next: () => Promise<void>) => {
    const given = ctx.query['X-Amz-Signature'];
    // as S3 does, every request is signed: in its query (presigned) or its Authorization header
    if (typeof given !== 'string') return verifyHeader(ctx, next);
    const [accessKeyId, , region, service] = String(ctx.query['X-Amz-Credential'] ?? '').split('/');
    const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(String(ctx.query['X-Amz-Date'] ?? ''));
    const query: Record<string, string> = {};
    for (const [k, v] of Object.entries(ctx.query)) if (!k.startsWith('X-Amz-') && typeof v === 'string') query[k] = v;
    let expected: string | undefined;
    if (accessKeyId === ACCESS_KEY_ID && region && service && date) {
      const presigner = new S3RequestPresigner({ ...config, region: async () => region, signingName: service });
      const signed = await presigner.presign(
        {
          method: ctx.method,
          protocol: 'http:',
          hostname: ctx.hostname,
          port: Number(ctx.host.split(':')[1]),
          path: ctx.path,
          query,
          headers: { host: ctx.host },
        } as never,
        {
          signingDate: new Date(`${date[1]}-${date[2]}-${date[3]}T${date[4]}:${date[5]}:${date[6]}Z`),
          expiresIn: Number(ctx.query['X-Amz-Expires']),
        },
      );
      expected = (signed.query as Record<string, string>)['X-Amz-Signature'];
    }
    if (expected === given && date) {
      // S3 judges the signature and its lifetime before anything about the object (a write-once refusal, say)
      const signedAt = Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3]), Number(date[4]), Number(date[5]), Number(date[6]));
      if (Date.now() > signedAt + Number(ctx.query['X-Amz-Expires']) * 1000) {
        return s3Error(ctx, 403, 'AccessDenied', 'Request has expired');
      }
    }
    if (expected !== given) {
      return s3Error(ctx, 403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.');
    }
    if (refusedUnsigned(ctx, String(ctx.query['X-Amz-SignedHeaders'] ?? ''))) return;
    await next();
  };
}

/**
 * The `x-amz-*` headers the signature does not cover (`signed`: the names it does, `;`-separated), which S3 refuses
 * (but `x-amz-content-sha256`, which it takes unsigned): whoever holds an upload URL cannot make it a copy of another
 * object (`x-amz-copy-source`) or give it metadata of their own.
 */
const unsignedAmzHeaders = (ctx: KoaLike, signed: string) =>
  Object.keys(ctx.headers).filter(
    (name) => name.startsWith('x-amz-') && name !== 'x-amz-content-sha256' && !signed.split(';').includes(name),
  );

/** S3's answer to a request with headers its signature leaves out, naming them. */
function refusedUnsigned(ctx: KoaLike, signed: string): boolean {
  const unsigned = unsignedAmzHeaders(ctx, signed);
  if (unsigned.length === 0) return false;
  // header names are HTTP tokens: nothing in them needs escaping in XML
  s3Error(ctx, 403, 'AccessDenied', 'There were headers present in the request which were not signed', {
    HeadersNotSigned: unsigned.join(', '),
  });
  return true;
}

const AUTHORIZATION =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/\d{8}\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/;

/**
 * A request signed in its Authorization header (the SDK's): its SigV4 signature recomputed with the SDK's
 * signer over the headers it names, with the payload hash it declares (`x-amz-content-sha256`); an unsigned
 * request, another access key or a mismatch is refused with 403, as S3 refuses it.
 */
function verifyHeaderV4(sha256: ConstructorParameters<typeof SignatureV4>[0]['sha256']) {
  return async (ctx: KoaLike, next: () => Promise<void>) => {
    const auth = AUTHORIZATION.exec(ctx.get('authorization'));
    if (!auth) return s3Error(ctx, 403, 'AccessDenied', 'Anonymous access is forbidden for this operation');
    const [, accessKeyId, region, service, signedHeaders, given] = auth as unknown as [string, string, string, string, string, string];
    if (accessKeyId !== ACCESS_KEY_ID)
      return s3Error(ctx, 403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.');
    const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(ctx.get('x-amz-date'));
    if (!date) return s3Error(ctx, 403, 'AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
    const headers: Record<string, string> = {};
    for (const name of signedHeaders.split(';')) headers[name] = ctx.get(name);
    const query: Record<string, string> = {};
    for (const [k, v] of Object.entries(ctx.query)) if (typeof v === 'string') query[k] = v;
    const signer = new SignatureV4({
      credentials: { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY },
      region,
      service,
      sha256,
      uriEscapePath: false,
      applyChecksum: false,
    });
    const signed = await signer.sign(
      {
        method: ctx.method,
        protocol: 'http:',
        hostname: ctx.hostname,
        port: Number(ctx.host.split(':')[1]),
        path: ctx.path,
        query,
        headers,
      } as never,
      { signingDate: new Date(`${date[1]}-${date[2]}-${date[3]}T${date[4]}:${date[5]}:${date[6]}Z`) },
    );
    const expected = /Signature=([0-9a-f]{64})/.exec(
      String((signed as unknown as { headers: Record<string, string> }).headers.authorization ?? ''),
    )?.[1];
    if (expected !== given)
      return s3Error(ctx, 403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.');
    if (refusedUnsigned(ctx, signedHeaders)) return;
    await next();
  };
}
