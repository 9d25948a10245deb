/**
 * `npm run example`: what a partner backend does, end to end, against `npm run dev` (docs/quickstart.md), with
 * the client library `@works-api/client` (sdk/). Creates an organization (operator CLI) and an API key (admin
 * API), registers a generated audio file, follows it over the WebSocket, receives and verifies the webhook,
 * adds a version, lists works and downloads the certificate.
 *
 * Usage: `npm run example -- [--base-url URL]`; without the flag, WORKS_API_URL, else http://127.0.0.1:$PORT
 * (PORT defaults to 3000).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { createClient, verifyWebhook, type Work } from '@works-api/client';

const USAGE = 'usage: npm run example -- [--base-url URL]  (default: $WORKS_API_URL, else http://127.0.0.1:$PORT, PORT 3000)';

/** The service's URL: `--base-url`, else the environment's; an unknown flag prints the usage and exits 2. */
function baseUrl(): string {
  let values: { 'base-url'?: string; help?: boolean };
  try {
    ({ values } = parseArgs({ options: { 'base-url': { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  return (values['base-url'] ?? process.env.WORKS_API_URL ?? `http://127.0.0.1:${process.env.PORT ?? 3000}`).replace(/\/+$/, '');
}

const BASE = baseUrl();
const ROOT = path.resolve(__dirname, '../..');
const step = (n: number, text: string) => process.stdout.write(`\n${n}. ${text}\n`);
const show = (text: string) => process.stdout.write(`   ${text}\n`);

/** The operator CLI, as an operator runs it; one JSON object on stdout. */
function admin(...args: string[]): any {
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'shared/cli/main.ts', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return JSON.parse(out);
}

/** One second of a 440 Hz sine as a 16-bit mono WAV: a real audio file, made here. */
function sineWav(seconds = 1, rate = 44_100): Buffer {
  const samples = seconds * rate;
  const data = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) data.writeInt16LE(Math.round(Math.sin((2 * Math.PI * 440 * i) / rate) * 12_000), i * 2);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

/** A local webhook receiver; resolves each event as it arrives. */
async function receiver(): Promise<{ url: string; next(): Promise<{ headers: http.IncomingHttpHeaders; raw: Buffer }>; close(): void }> {
  const waiting: ((e: { headers: http.IncomingHttpHeaders; raw: Buffer }) => void)[] = [];
  const queued: { headers: http.IncomingHttpHeaders; raw: Buffer }[] = [];
  const server = http.createServer((req, res) => {
    // the body's bytes as they came: decoding chunk by chunk would corrupt a character split across two chunks
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200).end();
      const event = { headers: req.headers, raw: Buffer.concat(chunks) };
      const resolve = waiting.shift();
      if (resolve) resolve(event);
      else queued.push(event);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hooks`,
    next: () => (queued.length ? Promise.resolve(queued.shift()!) : new Promise((r) => waiting.push(r))),
    close: () => server.close(),
  };
}

async function main(): Promise<void> {
  process.stdout.write(`works-api example against ${BASE}\n`);
  const ready = await fetch(`${BASE}/readyz`)
    .then((r) => r.json() as Promise<{ status: string }>)
    .catch((err: Error & { cause?: { code?: string; message?: string } }) => ({
      status: err.cause?.code ?? err.cause?.message ?? err.message,
    }));
  if (ready?.status !== 'ready')
    throw new Error(`the service at ${BASE} is not ready (${ready?.status}): start it with \`npm run dev\`, or pass --base-url`);

  step(1, 'An organization with 10,000 credits (operator CLI)');
  const org = admin('org', 'create', '--name', `Example ${new Date().toISOString()}`, '--credits', '10000');
  show(`organization ${org.organization_id}, testnet wallet ${org.wallets.testnet}`);

  step(2, 'An API key, created by the organization’s administrator (admin JWT from the development identity provider)');
  const { token: adminJwt } = admin('idp', 'token', '--org', org.organization_id);
  const hooks = await receiver();
  const key = await createClient({ baseUrl: BASE, token: adminJwt }).apiKeys.create(org.organization_id, {
    name: 'example',
    scopes: ['works:register', 'works:update', 'works:read'],
    webhook_url: hooks.url,
  });
  show(`key ${key.prefix}…, webhooks to ${hooks.url}`);
  // the partner's client: Node 20 has no global WebSocket, so the `ws` package's is given for live tracking
  const client = createClient({ baseUrl: BASE, token: key.token, WebSocket });

  step(3, 'Register a work: init, PUT the audio, prepare (the quote), confirm; then follow it live');
  const audio = sineWav();
  const registration = await client.works.register(
    {
      network: 'testnet',
      title: 'A4 for One Second',
      filename: 'a4.wav',
      creators: [{ full_name: 'Ada Lovelace', roles: { composer: true }, email: 'ada@example.test' }],
    },
    audio,
  );
  show(
    `${audio.length} bytes uploaded; quote: ${registration.quote.total_price_credits} credits, commitment ${registration.quote.commitment}`,
  );
  show(`confirmed: transaction ${registration.transaction_id}`);
  const tracked = await client.transactions.wait(registration.transaction_id, {
    onUpdate: (tx) => show(`  ${tx.progress}% ${tx.current_step} (${tx.status})`),
  });
  show(`transaction ${tracked.status}`);
  if (tracked.status === 'failed') {
    // nothing was registered: no webhook of success, no work to add a version to; the reason is the transaction's
    const error = tracked.result && 'error' in tracked.result ? tracked.result.error : { code: 'unknown', message: 'no reason given' };
    process.stderr.write(`registration failed: ${error.code}: ${error.message} (transaction ${tracked.transaction_id})\n`);
    process.exit(1);
  }

  step(4, 'Wait for the signed webhook and verify it');
  const registered = await hooks.next();
  // the signature, the timestamp's tolerance and the body's shape, checked by the library (throws otherwise)
  const event = verifyWebhook(registered.raw, registered.headers, key.webhook_secret);
  if (event.event !== 'work_registered') throw new Error(`expected work_registered, got ${event.event}`);
  show(`${event.event}: ats_id ${event.ats_id}, block ${event.block_number}, signature valid`);
  show(`explorer: ${event.explorer_url}`);

  step(5, 'Add a version: new creators, same audio (metadata only)');
  const version = await client.works.addVersion(event.ats_id, {
    network: 'testnet',
    creators: [
      { full_name: 'Ada Lovelace', roles: { composer: true }, email: 'ada@example.test' },
      { full_name: 'Charles Babbage', roles: { arranger: true } },
    ],
  });
  const updated = await hooks.next();
  const updatedEvent = verifyWebhook(updated.raw, updated.headers, key.webhook_secret);
  if (updatedEvent.event !== 'work_updated') throw new Error(`expected work_updated, got ${updatedEvent.event}`);
  show(`${updatedEvent.event}: version ${updatedEvent.version} (${version.quote.total_price_credits} credits), signature valid`);

  step(6, 'List the organization’s works');
  let work: Work | undefined;
  let shown = 0;
  // the iterator fetches the next page (5 at a time here) as the loop reaches it; the example stops after 5
  for await (const each of client.works.list({ network: 'testnet', first: 5 })) {
    show(`${each.ats_id}  v${each.latest_version}  ${each.title}`);
    if (each.ats_id === event.ats_id) work = each;
    if (++shown === 5) break;
  }

  step(7, 'Download the certificate of the latest version');
  const link = await client.works.downloads.certificate(work!.id);
  const pdf = Buffer.from(await (await fetch(link.url)).arrayBuffer());
  const file = path.join(ROOT, '.data', `certificate-${event.ats_id}.pdf`);
  await fs.writeFile(file, pdf);
  show(`${pdf.length} bytes, ${pdf.subarray(0, 5).toString()}… saved to ${path.relative(process.cwd(), file)}`);

  hooks.close();
  process.stdout.write('\ndone\n');
}

main().catch((err) => {
  process.stderr.write(`example failed: ${(err as Error).message}\n`);
  process.exit(1);
});
