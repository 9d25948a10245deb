import type { Doc } from './fonts';
import QRCode from 'qrcode';

export const COLORS = {
  paper: '#FBF7EE',
  ink: '#1E2A44',
  muted: '#5C6373',
  gold: '#A8874A',
  goldLight: '#E9DCC0',
  panel: '#F3ECDD',
} as const;

/** Paper, a double border and corner ornaments. */
export function drawFrame(doc: Doc): void {
  const { width, height } = doc.page;
  doc.save();
  doc.rect(0, 0, width, height).fill(COLORS.paper);
  doc
    .lineWidth(2)
    .strokeColor(COLORS.gold)
    .rect(20, 20, width - 40, height - 40)
    .stroke();
  doc
    .lineWidth(0.6)
    .strokeColor(COLORS.ink)
    .rect(27, 27, width - 54, height - 54)
    .stroke();
  for (const [x, y] of [
    [27, 27],
    [width - 27, 27],
    [27, height - 27],
    [width - 27, height - 27],
  ] as const) {
    doc.polygon([x, y - 6], [x + 6, y], [x, y + 6], [x - 6, y]).fill(COLORS.gold);
  }
  doc.restore();
}

/** A centred hairline with a small diamond in the middle. */
export function drawRule(doc: Doc, y: number, halfWidth: number): void {
  const cx = doc.page.width / 2;
  doc.save().lineWidth(0.6).strokeColor(COLORS.gold);
  doc
    .moveTo(cx - halfWidth, y)
    .lineTo(cx - 8, y)
    .stroke();
  doc
    .moveTo(cx + 8, y)
    .lineTo(cx + halfWidth, y)
    .stroke();
  doc.polygon([cx, y - 3.5], [cx + 3.5, y], [cx, y + 3.5], [cx - 3.5, y]).fill(COLORS.gold);
  doc.restore();
}

/** A QR code as vector squares, with its quiet zone, `size` points wide. */
export function drawQr(doc: Doc, text: string, x: number, y: number, size: number): void {
  const { count, runs } = qrRuns(text);
  const quiet = 2;
  const cell = size / (count + 2 * quiet);
  doc.save();
  doc.rect(x, y, size, size).fill('#FFFFFF');
  // a hair of overlap so no seam shows between neighbouring modules at any zoom
  for (const { row, col, length } of runs) doc.rect(x + (col + quiet) * cell, y + (row + quiet) * cell, length * cell + 0.05, cell + 0.05);
  doc.fill(COLORS.ink);
  doc.restore();
}

/** A row's consecutive dark modules. */
export interface QrRun {
  readonly row: number;
  readonly col: number;
  readonly length: number;
}

/**
 * The QR code of `text` (error correction M) as its rows' runs of dark modules: one rectangle per run, not per
 * module, halves the page's drawing. The text is one byte-mode segment: the library's search for the shortest
 * mix of modes cost more than the drawing. What it saved (a digit run in numeric mode) leaves the production
 * explorer's links at their size; the development default's link (polkadot.js apps) takes 41 modules instead
 * of 37 once its block number has seven digits.
 */
export function qrRuns(text: string): { count: number; runs: QrRun[] } {
  const qr = QRCode.create([{ data: Buffer.from(text, 'utf8'), mode: 'byte' }], { errorCorrectionLevel: 'M' });
  const count = qr.modules.size;
  const runs: QrRun[] = [];
  for (let row = 0; row < count; row++) {
    for (let col = 0; col < count; col++) {
      if (!qr.modules.get(row, col)) continue;
      const start = col;
      while (col + 1 < count && qr.modules.get(row, col + 1)) col++;
      runs.push({ row, col: start, length: col - start + 1 });
    }
  }
  return { count, runs };
}

/** A rosette seal: scalloped gold disc, text around the ring, two lines in the middle. */
export function drawSeal(doc: Doc, cx: number, cy: number, r: number, ring: string, middle: [string, string]): void {
  doc.save();
  const scallops = 36;
  for (let i = 0; i < scallops; i++) {
    const a = (2 * Math.PI * i) / scallops;
    doc.circle(cx + r * Math.cos(a), cy + r * Math.sin(a), r * 0.11);
  }
  doc.circle(cx, cy, r).fill(COLORS.gold);
  doc
    .lineWidth(0.8)
    .strokeColor(COLORS.paper)
    .circle(cx, cy, r * 0.9)
    .stroke();
  doc.circle(cx, cy, r * 0.62).fill(COLORS.paper);
  doc
    .lineWidth(0.5)
    .strokeColor(COLORS.gold)
    .circle(cx, cy, r * 0.56)
    .stroke();

  // the ring text, one glyph at a time along the circle, reading clockwise from the top
  doc
    .font('serif-bold')
    .fontSize(r * 0.17)
    .fillColor(COLORS.paper);
  const radius = r * 0.71;
  const widths = [...ring].map((ch) => doc.widthOfString(ch) + r * 0.012);
  const total = widths.reduce((a, b) => a + b, 0);
  let angle = -Math.PI / 2 - total / radius / 2;
  [...ring].forEach((ch, i) => {
    const w = widths[i]!;
    const mid = angle + w / radius / 2;
    doc.save();
    doc.translate(cx + radius * Math.cos(mid), cy + radius * Math.sin(mid));
    doc.rotate(((mid + Math.PI / 2) * 180) / Math.PI);
    doc.text(ch, -w / 2, -r * 0.085, { lineBreak: false });
    doc.restore();
    angle += w / radius;
  });

  doc
    .fillColor(COLORS.ink)
    .font('serif')
    .fontSize(r * 0.2);
  doc.text(middle[0], cx - r * 0.55, cy - r * 0.27, { width: r * 1.1, align: 'center', lineBreak: false });
  doc.font('serif-bold').fontSize(r * 0.3);
  doc.text(middle[1], cx - r * 0.55, cy - r * 0.05, { width: r * 1.1, align: 'center', lineBreak: false });
  doc.restore();
}
