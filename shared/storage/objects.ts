import http from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import type { Storage } from './s3';
import { presign, type ObjectMethod } from './presign';

/**
 * The object reads and writes of the hot paths (prepare's HEAD and GET of an upload, a certificate's HEAD and PUT),
 * sent as presigned requests over Node's HTTP client with kept-alive connections. The SDK's client runs its whole
 * middleware stack per command (endpoint rules, schema serde, retry, signing): about 1.1–1.4 ms of CPU per
 * HEAD or PUT on this machine against about 0.4 ms for the same request presigned here and sent with `http`,
 * four of them per registration (`docs/performance.md`). The requests are the SDK's own (the presigned URLs are
 * byte for byte what getSignedUrl makes: test/unit/presign.test.ts). Everything else (the bucket check, deletes,
 * the upload sweep) stays with the SDK.
 *
 * A 5xx answer or a connection that fails before any answer is tried once more (as the SDK's `maxAttempts: 2`
 * did); a request idle for `IDLE_TIMEOUT_MS` is abandoned.
 */
export class S3RequestError extends Error {
  override readonly name = 'S3RequestError';
  constructor(
    readonly method: ObjectMethod,
    readonly status: number | undefined,
    /** S3's error code (`<Code>` of the answer), when it gave one. */
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

export interface ObjectHead {
  readonly size: number;
  readonly etag: string;
}

/** How long a URL signed for one request lives: the request is sent at once. */
const URL_LIFE_S = 300;
const IDLE_TIMEOUT_MS = 30_000;
const ATTEMPTS = 2;

const agents = { 'http:': new http.Agent({ keepAlive: true }), 'https:': new https.Agent({ keepAlive: true }) };

/** The object's size and ETag, or undefined when there is no object at `key`. */
export async function headObject(storage: Storage, key: string): Promise<ObjectHead | undefined> {
  const res = await send(storage, 'HEAD', key, {}, [404]);
  res.resume();
  if (res.statusCode === 404) return undefined;
  return { size: Number(res.headers['content-length'] ?? 0), etag: String(res.headers.etag ?? '') };
}

/** Whether the bucket holds an object at `key` (a 404 is an answer; anything else is thrown). */
export async function objectExists(storage: Storage, key: string): Promise<boolean> {
  return (await headObject(storage, key)) !== undefined;
}

/** The object's bytes as a stream, only if its ETag is still `ifMatch` (412 otherwise). */
export async function getObject(storage: Storage, key: string, ifMatch: string): Promise<Readable> {
  return send(storage, 'GET', key, { 'If-Match': ifMatch });
}

/** Stores `body` at `key`. */
export async function putObject(storage: Storage, key: string, body: Buffer, contentType: string): Promise<void> {
  const res = await send(storage, 'PUT', key, { 'Content-Type': contentType, 'Content-Length': String(body.length) }, [], body);
  res.resume();
}

async function send(
  storage: Storage,
  method: ObjectMethod,
  key: string,
  headers: Record<string, string>,
  answers: readonly number[] = [],
  body?: Buffer,
): Promise<http.IncomingMessage> {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await request(await presign(storage, method, key, URL_LIFE_S), method, headers, body);
      const status = res.statusCode ?? 0;
      if ((status >= 200 && status < 300) || answers.includes(status)) return res;
      const error = new S3RequestError(method, status, await errorCode(res), `S3 ${method} answered ${status}`);
      if (status < 500 || attempt >= ATTEMPTS) throw error;
    } catch (err) {
      if (err instanceof S3RequestError && (err.status === undefined || err.status < 500)) throw err;
      if (attempt >= ATTEMPTS) throw err;
    }
  }
}

function request(url: string, method: ObjectMethod, headers: Record<string, string>, body?: Buffer): Promise<http.IncomingMessage> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(target, { method, headers, agent: agents[target.protocol as keyof typeof agents] }, resolve);
    req.setTimeout(IDLE_TIMEOUT_MS, () =>
      req.destroy(new S3RequestError(method, undefined, undefined, `S3 ${method} idle for ${IDLE_TIMEOUT_MS} ms`)),
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** S3's `<Code>` from an error answer's XML body (read whole: it is small). */
async function errorCode(res: http.IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return /<Code>([^<]{1,100})<\/Code>/.exec(Buffer.concat(chunks).toString('utf8'))?.[1];
}
