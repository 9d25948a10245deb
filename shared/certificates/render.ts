import PDFDocument from 'pdfkit';
import type { Creator } from '../works/types';
import { registerFonts, type Doc } from './fonts';
import { deflateStreams } from './streams';
import { heightOf, showsExactly, typeset } from './typeset';
import { COLORS, drawFrame, drawQr, drawRule, drawSeal } from './ornaments';
import { LEFT, PAGE_HEIGHT, WIDTH, label, note, sectionTitle } from './page';
import { NOTE, TABLE_TOP, creatorsTable, fitting, measureRows, sum } from './creators-table';

/** Everything a certificate states: one finalized version of a work, as indexed from the chain. */
export interface CertificateData {
  readonly workId: string;
  readonly atsId: number;
  readonly version: number;
  readonly network: string;
  readonly title: string;
  readonly filename: string;
  readonly creators: readonly Creator[];
  readonly commitment: string;
  readonly mediaHash: string;
  readonly merkleRoot: string;
  readonly owner: string;
  readonly blockNumber: number;
  readonly blockHash: string;
  readonly txHash: string;
  readonly finalizedAt: Date;
  readonly explorerUrl: string;
}

/** Height of the on-chain record and the verification sections that follow the creators on page 1. */
const BELOW_CREATORS = 358;
/** What the checking steps add for a title the page cannot give back exactly (see `verification`). */
const INEXACT_TITLE = 16;
/** The seal and the issuer's lines. */
const FOOTER_TOP = PAGE_HEIGHT - 128;
const CONTINUED_TOP = 80;

/** Renders the certificate of one version as an A4 PDF (more pages only when creators overflow the first). */
export function renderCertificate(data: CertificateData): Promise<Buffer> {
  const doc = new PDFDocument({
    size: 'A4',
    margin: 0,
    autoFirstPage: false,
    bufferPages: true,
    // no default font: PDFKit would load and parse Helvetica's metrics for every document, and none is drawn in it
    font: null as unknown as string,
    info: {
      Title: `Certificate of registration: ${data.title} (version ${data.version})`,
      Author: 'works-api',
      Subject: `ats_id ${data.atsId} on ${data.network}, commitment ${data.commitment}`,
      CreationDate: data.finalizedAt,
    },
  });
  const chunks: Buffer[] = [];
  doc.on('data', (chunk: Buffer) => chunks.push(chunk));
  const done = new Promise<Buffer>((resolve, reject) => {
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
  });
  // its streams deflated at a lower level than PDFKit's (streams.ts)
  deflateStreams(doc);
  registerFonts(doc);

  newPage(doc);
  let y = header(doc, data);
  const rows = measureRows(doc, data.creators);
  const limit = FOOTER_TOP - BELOW_CREATORS - (showsExactly(data.title, 'serif-bold') ? 0 : INEXACT_TITLE);
  let first = fitting(rows, limit - (y + TABLE_TOP));
  const height = TABLE_TOP + sum(rows.slice(0, first)) + (first < rows.length ? NOTE : 0);
  // room left on page 1 by a short list goes above and below the creators, up to a point, and the rest last
  const gap = Math.min(28, Math.max(0, limit - y - height) / 3);
  y = sectionTitle(doc, 'Creators', y + 12 + gap);
  y = creatorsTable(doc, rows.slice(0, first), y) + (first < rows.length ? NOTE : 0);
  if (first < rows.length) note(doc, `… and ${rows.length - first} more, continued on the next page.`, y - NOTE + 3);
  y = record(doc, data, y + 16 + gap);
  verification(doc, data, y + 22);
  while (first < rows.length) {
    newPage(doc);
    const top = sectionTitle(doc, 'Creators (continued)', CONTINUED_TOP);
    const count = fitting(rows.slice(first), FOOTER_TOP - 24 - top);
    const end = creatorsTable(doc, rows.slice(first, first + count), top);
    first += count;
    if (first < rows.length) note(doc, '… continued on the next page.', end + 3);
  }
  const range = doc.bufferedPageRange();
  for (let i = 0; i < range.count; i++) {
    doc.switchToPage(range.start + i);
    footer(doc, data, range.count > 1 ? `page ${i + 1} of ${range.count}` : undefined);
  }
  doc.end();
  return done;
}

function newPage(doc: Doc): void {
  doc.addPage();
  drawFrame(doc);
}

function header(doc: Doc, data: CertificateData): number {
  label(doc, 'CERTIFICATE OF REGISTRATION', 'serif-bold', 13, LEFT, 56, {
    width: WIDTH,
    align: 'center',
    color: COLORS.gold,
    characterSpacing: 4,
  });
  label(doc, 'of a musical work, anchored on a public blockchain', 'serif-italic', 12, LEFT, 76, {
    width: WIDTH,
    align: 'center',
    color: COLORS.muted,
  });
  drawRule(doc, 100, 150);

  // the title as large as fits in two lines, else smaller in three, else smaller still in as many as it takes: it
  // is never cut, since checking the commitment reads it from this page
  const lines = (size: number) => heightOf(doc, data.title, 'serif-bold', { size, width: WIDTH }) / (size * 1.25);
  let size = 30;
  while (size > 16 && lines(size) > 2) size -= 1;
  while (size > 12 && lines(size) > 3) size -= 1;
  // and no taller than two lines of the largest size, so the first page keeps its room for the rest
  while (size > 8 && lines(size) * size > 2 * 30) size -= 1;
  let y = typeset(doc, data.title, 'serif-bold', {
    x: LEFT,
    y: 114,
    width: WIDTH,
    size,
    align: 'center',
    color: COLORS.ink,
    leading: 1.18,
  });
  y = typeset(doc, `Version ${data.version}  ·  ${data.filename}`, 'serif-italic', {
    x: LEFT,
    y: y + 4,
    width: WIDTH,
    size: 12.5,
    align: 'center',
    maxLines: 2,
    color: COLORS.muted,
  });
  const intro =
    `This certifies that version ${data.version} of this work, with its audio and its creators, was fingerprinted and recorded in ` +
    `block ${data.blockNumber.toLocaleString('en-US')} of the ${data.network} chain on ${longDate(data.finalizedAt)}. ` +
    'Anyone can check the record without having to trust the issuer of this certificate.';
  return label(doc, intro, 'serif', 10.5, LEFT + 24, y + 8, { width: WIDTH - 48, align: 'center', lineGap: 1 });
}

function record(doc: Doc, data: CertificateData, top: number): number {
  let y = sectionTitle(doc, 'The on-chain record', top);
  const facts: [string, string, number][] = [
    ['Work (ats_id)', `#${data.atsId}`, 82],
    ['Version', String(data.version), 60],
    ['Network', data.network, 78],
    ['Block', data.blockNumber.toLocaleString('en-US'), 92],
    ['Finalized (UTC)', data.finalizedAt.toISOString().slice(0, 19).replace('T', ' '), WIDTH - 312],
  ];
  let x = LEFT;
  for (const [name, value, width] of facts) {
    label(doc, name, 'serif-italic', 9, x, y, { width: width - 6, color: COLORS.muted });
    label(doc, value, 'serif-bold', 13, x, y + 11, { width: width - 6, lineBreak: false });
    x += width;
  }
  y += 40;
  const hashes: [string, string][] = [
    ['Commitment', data.commitment],
    ['Media hash (SHA-256 of the audio)', data.mediaHash],
    ["Creators' Merkle root", data.merkleRoot],
    ['Block hash', data.blockHash],
    ['Transaction hash', data.txHash],
    ['Owner account', data.owner],
  ];
  doc
    .save()
    .roundedRect(LEFT - 8, y - 6, WIDTH + 16, hashes.length * 18 + 6, 4)
    .fill(COLORS.panel)
    .restore();
  for (const [name, value] of hashes) {
    label(doc, name, 'serif', 9.5, LEFT, y, { width: 150, color: COLORS.muted });
    label(doc, value, 'mono', 7.6, LEFT + 152, y + 1.4, { width: WIDTH - 152, lineBreak: false });
    y += 18;
  }
  return y;
}

function verification(doc: Doc, data: CertificateData, top: number): void {
  const y0 = sectionTitle(doc, 'How anyone can check it', top);
  const qrSize = 88;
  const width = WIDTH - qrSize - 22;
  // docs/api.md#the-commitment: what the audio and this page are enough to recompute, and what they are not
  const steps = [
    'Compute the SHA-256 of the audio file: it must equal the media hash above.',
    "Compute the SHA-256 of, in this order: the byte 0x01 (protocol version 1), the media hash (32 bytes), the title's " +
      "length in UTF-8 bytes as 4 bytes little-endian then those bytes, and the creators' Merkle root (32 bytes). " +
      'It must equal the commitment.',
    'Scan the code to open the transaction: the commitment written in that block is this one.',
  ];
  let y = y0;
  steps.forEach((step, i) => {
    label(doc, `${i + 1}.`, 'serif-bold', 9.5, LEFT, y, { width: 14, color: COLORS.gold });
    y = label(doc, step, 'serif', 9.5, LEFT + 14, y, { width: width - 14 }) + 2;
  });
  if (data.explorerUrl) {
    y = label(doc, data.explorerUrl, 'mono', 6.4, LEFT + 14, y + 2, { width: width - 14, link: data.explorerUrl, color: COLORS.muted });
    const qrX = LEFT + WIDTH - qrSize;
    drawQr(doc, data.explorerUrl, qrX, y0 - 2, qrSize);
    doc.link(qrX, y0 - 2, qrSize, qrSize, data.explorerUrl);
    label(doc, 'View the transaction', 'serif-italic', 8.5, qrX - 10, y0 + qrSize + 1, {
      width: qrSize + 20,
      align: 'center',
      color: COLORS.muted,
    });
  }
  // a reader copying the title from the page gets one space for a run of them, a space for a no-break space, nothing
  // for a box: for such a title the page says so rather than claim it is enough
  const only = showsExactly(data.title, 'serif-bold')
    ? 'These steps need only the audio and this page'
    : 'Step 2 needs the title as registered: this one has white space or characters that a page cannot give back as they ' +
      'are (a run of spaces, a no-break space, a box…). The other steps need only the audio and this page';
  label(
    doc,
    `${only}, taking the creators' Merkle root as printed. That root is the top of a ` +
      "Merkle tree of 32 slots built with SHA-256 from each creator's name, e-mail, roles, IPI and ISNI as registered, and " +
      "no e-mail is printed here: that the creators listed are the ones committed can be checked only with the creators' " +
      'details the registrant holds.',
    'serif-italic',
    9,
    LEFT + 14,
    y + 5,
    { width: width - 14, color: COLORS.muted, lineGap: 0.5 },
  );
}

function footer(doc: Doc, data: CertificateData, page?: string): void {
  drawSeal(doc, LEFT + 40, FOOTER_TOP + 56, 38, 'REGISTERED ON CHAIN · PROTOCOL 1 · ', ['ATS', `#${data.atsId}`]);
  const x = LEFT + 100;
  label(doc, `Certificate of version ${data.version} of work ${data.workId}`, 'serif', 8.5, x, FOOTER_TOP + 44, {
    width: WIDTH - 100,
    color: COLORS.muted,
  });
  label(doc, `Issued by works-api from the finalized chain record${page ? `  ·  ${page}` : ''}`, 'serif', 8.5, x, FOOTER_TOP + 56, {
    width: WIDTH - 100,
    color: COLORS.muted,
  });
}

/** ISNI is read in groups of four: 0000 0001 2146 438X. */
const longDate = (d: Date) => d.toLocaleDateString('en-GB', { day: 'numeric', month: 'long', year: 'numeric', timeZone: 'UTC' });
