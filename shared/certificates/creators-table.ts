import type { Creator } from '../works/types';
import type { Doc, Face } from './fonts';
import { heightOf, typeset } from './typeset';
import { COLORS } from './ornaments';
import { LEFT, WIDTH, label } from './page';

// The creators' table: measured first, so the pages can be planned, then drawn a page's share at a time.

const ROLE_NAMES: Record<string, string> = { author: 'Author', composer: 'Composer', arranger: 'Arranger', adapter: 'Adapter' };
/** Creators' table: name, roles, IPI, ISNI. */
const COLUMNS = [
  { label: 'Creator', width: 168 },
  { label: 'Roles', width: 116 },
  { label: 'IPI', width: 74 },
  { label: 'ISNI', width: WIDTH - 168 - 116 - 74 },
] as const;

export interface Row {
  readonly n: number;
  readonly cells: readonly { text: string; face: Face; size: number }[];
  readonly height: number;
}

/** The table's column heads and the "continued" note. */
export const TABLE_TOP = 34 + 14;
export const NOTE = 16;

export function measureRows(doc: Doc, creators: readonly Creator[]): Row[] {
  return creators.map((creator, i) => {
    const roles = Object.entries(creator.roles)
      .filter(([, on]) => on)
      .map(([role]) => ROLE_NAMES[role] ?? role)
      .join(', ');
    const cells = [
      { text: `${i + 1}. ${creator.full_name}`, face: 'serif-bold' as const, size: 11 },
      { text: roles, face: 'serif-italic' as const, size: 10.5 },
      { text: creator.ipi ?? '—', face: 'serif' as const, size: 10.5 },
      { text: creator.isni ? isni(creator.isni) : '—', face: 'serif' as const, size: 10.5 },
    ];
    const height =
      Math.max(...cells.map((c, j) => heightOf(doc, c.text, c.face, { size: c.size, width: COLUMNS[j]!.width - 8, maxLines: 2 }))) + 7;
    return { n: i + 1, cells, height };
  });
}

export const sum = (rows: readonly Row[]) => rows.reduce((total, row) => total + row.height, 0);

/** How many of `rows` fit in `room` points (at least one), leaving space for the note when some remain. */
export function fitting(rows: readonly Row[], room: number): number {
  let used = 0;
  for (let i = 0; i < rows.length; i++) {
    used += rows[i]!.height;
    const note = i < rows.length - 1 ? NOTE : 0;
    if (used + note > room) return Math.max(1, i);
  }
  return rows.length;
}

/** Column heads, then one row per creator, each as tall as its tallest cell; returns the y below. */
export function creatorsTable(doc: Doc, rows: readonly Row[], top: number): number {
  let x = LEFT;
  for (const column of COLUMNS) {
    label(doc, column.label, 'serif-italic', 8.5, x, top, { width: column.width - 8, color: COLORS.muted });
    x += column.width;
  }
  let y = top + 14;
  for (const row of rows) {
    x = LEFT;
    row.cells.forEach((c, i) => {
      typeset(doc, c.text, c.face, {
        x,
        y: y + 4,
        width: COLUMNS[i]!.width - 8,
        size: c.size,
        maxLines: 2,
        color: i === 1 ? COLORS.muted : COLORS.ink,
      });
      x += COLUMNS[i]!.width;
    });
    y += row.height;
    doc
      .save()
      .lineWidth(0.3)
      .strokeColor(COLORS.goldLight)
      .moveTo(LEFT, y)
      .lineTo(LEFT + WIDTH, y)
      .stroke()
      .restore();
  }
  return y;
}

const isni = (value: string) => value.replace(/(.{4})(?=.)/g, '$1 ');
