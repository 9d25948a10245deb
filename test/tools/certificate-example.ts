import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { PDFParse } from 'pdf-parse';
import { renderCertificate, type CertificateData } from '../../shared/certificates/render';
import { computeCommitment, toHex } from '../../shared/registration/commitment';
import type { Creator } from '../../shared/works/types';

/**
 * Renders a certificate of made-up data and its first page as a PNG for the docs:
 * `npm run docs:certificate` → docs/certificate-example.pdf and docs/certificate-example.png.
 * The audio is a few made-up bytes, but its hashes are real (docs/api.md#the-commitment), so the steps the certificate prints
 * can be followed on the example; the creators' e-mails are in the commitment, not on the page.
 */
export const EXAMPLE_AUDIO = Buffer.from('the audio of Symphony for Engines, made up for this example');

const title = 'Symphony for Engines';
/** The creators as registered, e-mails included. */
export const EXAMPLE_CREATORS: readonly Creator[] = [
  {
    full_name: 'Ada Lovelace',
    roles: { author: true, composer: true },
    ipi: '00012345678',
    isni: '000000012146438X',
    email: 'ada@example.org',
  },
  { full_name: 'Charles Babbage', roles: { arranger: true } },
  { full_name: 'Léonie Dvořáková', roles: { adapter: true, author: true }, ipi: '00098765432', email: 'leonie@example.org' },
];
const hashes = computeCommitment(createHash('sha256').update(EXAMPLE_AUDIO).digest(), title, EXAMPLE_CREATORS);

export const EXAMPLE: CertificateData = {
  workId: '3f1c2a9e-5b7d-4e21-9c4a-8d2f6b1e0a37',
  atsId: 1284,
  version: 2,
  network: 'testnet',
  title,
  filename: 'symphony-for-engines_master_24bit.wav',
  creators: EXAMPLE_CREATORS,
  commitment: toHex(hashes.commitment),
  mediaHash: toHex(hashes.mediaHash),
  merkleRoot: toHex(hashes.merkleRoot),
  owner: '5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY',
  blockNumber: 4521877,
  blockHash: '0x7c1e0d3b9a8f6e5d4c3b2a1908f7e6d5c4b3a2918f7e6d5c4b3a29187f6e5d4c',
  txHash: '0x1f2e3d4c5b6a79880f1e2d3c4b5a69788f9e0d1c2b3a49586f7e8d9c0b1a2f3e',
  finalizedAt: new Date('2026-11-22T14:03:27Z'),
  explorerUrl: 'https://explorer.allfeat.org/extrinsics/4521877-2?network=melodie',
};

async function main(): Promise<void> {
  const pdf = await renderCertificate(EXAMPLE);
  const dir = path.resolve(__dirname, '../../docs');
  writeFileSync(path.join(dir, 'certificate-example.pdf'), pdf);
  const parser = new PDFParse({ data: new Uint8Array(pdf) });
  const shot = await parser.getScreenshot({ scale: 1.6, imageBuffer: true, imageDataUrl: false, first: 1 });
  await parser.destroy();
  writeFileSync(path.join(dir, 'certificate-example.png'), shot.pages[0]!.data);
  process.stdout.write(`docs/certificate-example.pdf (${pdf.length} bytes) and docs/certificate-example.png\n`);
}

if (require.main === module)
  main().catch((err) => {
    process.stderr.write(`${(err as Error).stack}\n`);
    process.exit(1);
  });
