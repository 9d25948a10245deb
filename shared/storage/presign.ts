import { createHmac, hash } from 'node:crypto';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Storage } from './s3';

interface Endpoint {
  readonly origin: string;
  readonly host: string;
  /** The path before the object key: `/bucket/` (path style) or `/` (virtual-hosted). */
  readonly keyPrefix: string;
  /** Query parameters the SDK adds to a PUT besides the signature's and `x-id` (checksum ones, if configured), escaped. */
  readonly putQuery: readonly (readonly [string, string])[];
  readonly region: string;
  readonly service: string;
}

interface SignedQuery {
  /** What the query depends on besides the method: the date, the life and the credentials. */
  readonly id: string;
  readonly day: string;
  readonly scope: string;
  readonly canonical: string;
  /** The query string up to the signature's value, and after it. */
  readonly before: string;
  readonly after: string;
}

interface Credentials {
  readonly accessKeyId: string;
  readonly sessionToken?: string;
}

interface SigningKey {
  readonly secret: string;
  readonly day: string;
  readonly key: Buffer;
}

const ALGORITHM = 'AWS4-HMAC-SHA256';
const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
/** SigV4's own limit on a presigned URL's life. */
const MAX_EXPIRES_S = 7 * 24 * 3600;

/** The methods signed, with the `x-id` the SDK adds to its presigned URLs of each (none to a HEAD). */
const X_ID = { PUT: 'PutObject', GET: 'GetObject', HEAD: undefined } as const;
export type ObjectMethod = keyof typeof X_ID;

/**
 * Presigned URLs for the objects of one bucket (a PUT, GET or HEAD of one key), signed here with SigV4 (query-string authentication) instead of by the SDK
 * per URL. The SDK's getSignedUrl builds and runs the S3 client's whole middleware stack on every call, and even
 * its bare signer (`S3RequestPresigner.presign`) clones the request and hashes the credentials to find its
 * cached signing key: 20–25 µs of an init's ~220 µs of CPU (`npm run bench -- api`, profile). Signing one PUT
 * with `host` as its only signed header is one SHA-256 and one HMAC once the day's signing key is known, so
 * this class does just that (the query string, the same for every URL of one second, life and credentials, made
 * once for them), with what depends only on the bucket (endpoint, region, service, the SDK's extra
 * query parameters) read once from a URL getSignedUrl made. The URLs are byte for byte the SDK's
 * (test/unit/presign.test.ts compares them, with and without a session token, across a change of
 * credentials and of day). Credentials are asked of the client's provider on every URL, so rotation holds.
 */
export class Presigner {
  private endpoint: Promise<Endpoint> | undefined;
  private signingKey: SigningKey | undefined;
  /** The last second's `X-Amz-Date`. */
  private date: { readonly second: number; readonly amzDate: string } | undefined;
  /** Per method, the last query signed: every URL of one second, life and credentials shares it. */
  private readonly queries = new Map<ObjectMethod, SignedQuery>();

  constructor(private readonly storage: Storage) {}

  async url(method: ObjectMethod, key: string, expiresIn: number, signingDate = new Date()): Promise<string> {
    if (!Number.isInteger(expiresIn) || expiresIn < 1 || expiresIn > MAX_EXPIRES_S) {
      throw new RangeError(`a presigned URL lives 1 to ${MAX_EXPIRES_S} seconds, not ${expiresIn}`);
    }
    const endpoint = await (this.endpoint ??= this.resolve().catch((err) => {
      this.endpoint = undefined;
      throw err;
    }));
    const credentials = await this.storage.client.config.credentials();
    const amzDate = this.amzDate(signingDate);
    const query = this.query(method, amzDate, expiresIn, credentials, endpoint);
    const path = endpoint.keyPrefix + key.split('/').map(escapeUri).join('/');
    const canonical = `${method}\n${path}\n${query.canonical}\nhost:${endpoint.host}\n\nhost\n${UNSIGNED_PAYLOAD}`;
    const toSign = `${ALGORITHM}\n${amzDate}\n${query.scope}\n${hash('sha256', canonical)}`;
    const signature = createHmac('sha256', this.keyFor(credentials.secretAccessKey, query.day, endpoint))
      .update(toSign)
      .digest('hex');
    return `${endpoint.origin}${path}?${query.before}${signature}${query.after}`;
  }

  /** 20261126T121517Z, made once a second. */
  private amzDate(signingDate: Date): string {
    const second = Math.floor(signingDate.getTime() / 1000);
    if (this.date?.second === second) return this.date.amzDate;
    const amzDate = signingDate
      .toISOString()
      .replace(/[-:]/g, '')
      .replace(/\.\d{3}/, '');
    this.date = { second, amzDate };
    return amzDate;
  }

  /** The query string of a URL signed at `amzDate`, canonical (unsigned) and around its signature. */
  private query(method: ObjectMethod, amzDate: string, expiresIn: number, credentials: Credentials, endpoint: Endpoint): SignedQuery {
    const id = `${amzDate}\n${expiresIn}\n${credentials.accessKeyId}\n${credentials.sessionToken ?? ''}`;
    const kept = this.queries.get(method);
    if (kept?.id === id) return kept;
    const day = amzDate.slice(0, 8);
    const scope = `${day}/${endpoint.region}/${endpoint.service}/aws4_request`;
    const pairs: (readonly [string, string])[] = [
      ['X-Amz-Algorithm', ALGORITHM],
      ['X-Amz-Content-Sha256', UNSIGNED_PAYLOAD],
      ['X-Amz-Credential', escapeUri(`${credentials.accessKeyId}/${scope}`)],
      ['X-Amz-Date', amzDate],
      ['X-Amz-Expires', String(expiresIn)],
      ['X-Amz-SignedHeaders', 'host'],
      ...(method === 'PUT' ? endpoint.putQuery : []),
    ];
    if (X_ID[method]) pairs.push(['x-id', X_ID[method]]);
    if (credentials.sessionToken) pairs.push(['X-Amz-Security-Token', escapeUri(credentials.sessionToken)]);
    const canonical = search(pairs);
    // the signature, a hex string, takes its place in the sorted query; a NUL marks it, being no query's byte
    const [before, after] = search([...pairs, ['X-Amz-Signature', '\0']]).split('\0') as [string, string];
    const query = { id, day, scope, canonical, before, after };
    this.queries.set(method, query);
    return query;
  }

  /** The day's signing key (four HMACs), kept until the day or the secret changes. */
  private keyFor(secret: string, day: string, endpoint: Endpoint): Buffer {
    const kept = this.signingKey;
    if (kept && kept.secret === secret && kept.day === day) return kept.key;
    const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
    const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), endpoint.region), endpoint.service), 'aws4_request');
    this.signingKey = { secret, day, key };
    return key;
  }

  /** The endpoint, signing region and service of this bucket, read from one URL the SDK presigned. */
  private async resolve(): Promise<Endpoint> {
    const probe = '__endpoint_probe__';
    const sample = new URL(
      await getSignedUrl(this.storage.client, new PutObjectCommand({ Bucket: this.storage.bucket, Key: probe }), { expiresIn: 60 }),
    );
    if (!sample.pathname.endsWith(`/${probe}`)) throw new Error(`unexpected presigned URL layout: ${sample.pathname}`);
    // SigV4 alone (not SigV4a, whose scope has no region, nor S3 Express's session signing): key/day/region/service/aws4_request
    const scope = (sample.searchParams.get('X-Amz-Credential') ?? '').split('/');
    const [, , region, service] = scope;
    if (
      sample.searchParams.get('X-Amz-Algorithm') !== ALGORITHM ||
      scope.length !== 5 ||
      scope[4] !== 'aws4_request' ||
      !region ||
      !service
    ) {
      throw new Error(
        `presigned URL of another signing scheme: ${sample.searchParams.get('X-Amz-Algorithm')}, ${scope.length} scope parts`,
      );
    }
    if (sample.searchParams.get('X-Amz-SignedHeaders') !== 'host') {
      throw new Error(`presigned URL signs more than its host: ${sample.searchParams.get('X-Amz-SignedHeaders')}`);
    }
    const putQuery: [string, string][] = [];
    for (const [k, v] of sample.searchParams) if (!k.startsWith('X-Amz-') && k !== 'x-id') putQuery.push([escapeUri(k), escapeUri(v)]);
    return { origin: sample.origin, host: sample.host, keyPrefix: sample.pathname.slice(0, -probe.length), putQuery, region, service };
  }
}

/** A query string of escaped pairs in SigV4's order (by name, code unit by code unit), as the SDK writes it too. */
function search(query: (readonly [string, string])[]): string {
  return [...query]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

/** RFC 3986 escaping, as the SDK escapes object keys and query values. */
function escapeUri(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * When a URL signed at `signingDate` for `expiresIn` seconds lapses. SigV4's `X-Amz-Date` is whole seconds, so a URL's
 * life counts from the start of the second it was signed in: the time to tell its holder, not `signingDate` + life,
 * which is up to a second after S3 refuses it.
 */
export const lapseOf = (signingDate: Date, expiresIn: number): Date =>
  new Date(Math.floor(signingDate.getTime() / 1000) * 1000 + expiresIn * 1000);

const presigners = new WeakMap<Storage, Presigner>();

/** A presigned `method` of `key` valid `expiresIn` seconds from `signingDate`'s second, with the storage's one presigner. */
export function presign(storage: Storage, method: ObjectMethod, key: string, expiresIn: number, signingDate?: Date): Promise<string> {
  let presigner = presigners.get(storage);
  if (!presigner) presigners.set(storage, (presigner = new Presigner(storage)));
  return presigner.url(method, key, expiresIn, signingDate);
}
