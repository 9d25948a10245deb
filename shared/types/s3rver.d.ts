declare module 's3rver' {
  import type Koa from 'koa';
  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    allowMismatchedSignatures?: boolean;
    configureBuckets?: { name: string; configs: unknown[] }[];
  }
  export default class S3rver extends Koa {
    constructor(options: S3rverOptions);
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
    context: Koa['context'] & { store: unknown };
  }
}

declare module 's3rver/lib/models/error.js' {
  /** s3rver's S3 error: thrown by a store or a middleware, answered with S3's status for its code, in S3's XML. */
  export default class S3Error extends Error {
    constructor(code: string, message: string, detail?: Record<string, string>);
    readonly code: string;
    readonly status: number;
  }
}
