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
