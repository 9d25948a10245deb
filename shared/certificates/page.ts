import type { Doc } from './fonts';
import { COLORS } from './ornaments';

// The page's geometry and the fixed-wording helpers every section uses.

export const PAGE_HEIGHT = 841.89;
export const LEFT = 62;
export const WIDTH = 595.28 - 2 * LEFT;

/** Fixed wording in one font (no partner text: that goes through typeset). */
export function label(
  doc: Doc,
  text: string,
  font: string,
  size: number,
  x: number,
  y: number,
  options: PDFKit.Mixins.TextOptions & { color?: string } = {},
): number {
  const { color, ...rest } = options;
  doc
    .font(font)
    .fontSize(size)
    .fillColor(color ?? COLORS.ink)
    .text(text, x, y, rest);
  return doc.y;
}

export function note(doc: Doc, text: string, y: number): void {
  label(doc, text, 'serif-italic', 10, LEFT, y, { width: WIDTH, color: COLORS.muted });
}

export function sectionTitle(doc: Doc, title: string, y: number): number {
  label(doc, title.toUpperCase(), 'serif-bold', 9, LEFT, y, { width: WIDTH, color: COLORS.gold, characterSpacing: 2 });
  doc
    .save()
    .lineWidth(0.5)
    .strokeColor(COLORS.gold)
    .moveTo(LEFT, y + 14)
    .lineTo(LEFT + WIDTH, y + 14)
    .stroke()
    .restore();
  return y + 22;
}
