import { readFileSync, writeFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { loadConfig, processEnv } from '../../shared/config';
import { createStorage } from '../../shared/storage/s3';

/**
 * The hash bench's floor, in a process of its own like the prepare worker: a plain S3 GET of an object with
 * the same client (no HEAD, no hashing), its bytes read and dropped. Answers { ms, bytes, peakRssIncrease }.
 */
const storage = createStorage(loadConfig(processEnv()).s3);
const kb = (field: string) =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN) * 1024;

process.on('message', async (message: { key: string }) => {
  global.gc?.();
  const before = kb('VmRSS');
  writeFileSync('/proc/self/clear_refs', '5');
  const started = process.hrtime.bigint();
  const object = await storage.client.send(new GetObjectCommand({ Bucket: storage.bucket, Key: message.key }));
  let bytes = 0;
  for await (const chunk of object.Body as Readable) bytes += (chunk as Buffer).length;
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  process.send!({ ms, bytes, peakRssIncrease: kb('VmHWM') - before });
});
process.send!({ ready: true });
