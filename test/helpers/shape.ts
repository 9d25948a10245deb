import path from 'node:path';
import { readdirSync, readFileSync, statSync } from 'node:fs';

/**
 * Static checks of the source tree's shape (test/unit/shape.test.ts): pure functions over file texts, so
 * that the test can prove each detector on small inline fixtures before running it on the tree.
 * Paths are repository-relative with forward slashes.
 */
export type Sources = ReadonlyMap<string, string>;

/** Every `.ts` file under the given folders of `root`, as repository-relative path → text. */
export function readSources(root: string, folders: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string) => {
    for (const name of readdirSync(path.join(root, dir)).sort()) {
      const rel = `${dir}/${name}`;
      if (name === 'node_modules' || name.startsWith('.')) continue;
      if (statSync(path.join(root, rel)).isDirectory()) walk(rel);
      else if (name.endsWith('.ts')) out.set(rel, readFileSync(path.join(root, rel), 'utf8'));
    }
  };
  for (const folder of folders) walk(folder);
  return out;
}

/** A source split into its code (comments removed, string contents kept) and the contents of its string literals. */
export function lex(text: string): { code: string; strings: string[] } {
  let code = '';
  const strings: string[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    const next = text[i + 1];
    if (c === '/' && next === '/') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      const stop = end < 0 ? text.length : end + 2;
      code += text.slice(i, stop).replace(/[^\n]/g, ''); // keeps line numbers
      i = stop;
    } else if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      while (j < text.length && text[j] !== c) {
        if (text[j] === '\\') j++;
        else if (c !== '`' && text[j] === '\n') break; // unterminated: not a string after all
        j++;
      }
      strings.push(text.slice(i + 1, j));
      code += text.slice(i, j + 1);
      i = j + 1;
    } else {
      code += c;
      i++;
    }
  }
  return { code, strings };
}

// ---------------------------------------------------------------------------------------------------------
// Import cycles

export interface Edge {
  readonly from: string;
  readonly to: string;
  /** `import type` / `export type`: erased at compile time, yet a dependency of one module on another. */
  readonly typeOnly: boolean;
}

const SPECIFIERS = [
  // import x from './a'; import { x } from './a'; import type { X } from './a'; export { x } from './a'; export * from './a'
  /\b(import|export)\s+(type\s+)?(?:[\w*${}\s,]+?\s+from\s+)?['"](\.{1,2}\/[^'"]*|\.{1,2})['"]/g,
  // import('./a'), require('./a')
  /\b(import|require)\s*\(\s*['"](\.{1,2}\/[^'"]*|\.{1,2})['"]\s*\)/g,
];

/** The file a relative specifier names, among `files`, or undefined (a package, or a file outside them). */
export function resolveSpecifier(from: string, specifier: string, files: Sources): string | undefined {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  const stem = base.replace(/\.(js|mjs|cjs)$/, '');
  for (const candidate of [base, `${stem}.ts`, `${stem}.tsx`, `${stem}/index.ts`]) if (files.has(candidate)) return candidate;
  return undefined;
}

/** The import graph among `files`: one edge per importing file and imported file (type-only if every import of it is). */
export function importEdges(files: Sources): Edge[] {
  const edges = new Map<string, Edge>();
  for (const [file, text] of files) {
    const { code } = lex(text);
    const found: { specifier: string; typeOnly: boolean }[] = [];
    for (const m of code.matchAll(SPECIFIERS[0]!)) found.push({ specifier: m[3]!, typeOnly: Boolean(m[2]) });
    for (const m of code.matchAll(SPECIFIERS[1]!)) found.push({ specifier: m[2]!, typeOnly: false });
    for (const { specifier, typeOnly } of found) {
      const to = resolveSpecifier(file, specifier, files);
      if (!to || to === file) continue;
      const key = `${file}\0${to}`;
      const seen = edges.get(key);
      edges.set(key, { from: file, to, typeOnly: seen ? seen.typeOnly && typeOnly : typeOnly });
    }
  }
  return [...edges.values()];
}

/** Strongly connected components of more than one file (Tarjan), each sorted, largest first. */
export function importCycles(files: Sources, edges: readonly Edge[] = importEdges(files)): string[][] {
  const out = new Map<string, string[]>();
  for (const e of edges) out.set(e.from, [...(out.get(e.from) ?? []), e.to]);
  let index = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string) => {
    order.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of out.get(v) ?? []) {
      if (!order.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, order.get(w)!));
    }
    if (low.get(v) === order.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const file of [...files.keys()].sort()) if (!order.has(file)) visit(file);
  return components.sort((a, b) => b.length - a.length || a[0]!.localeCompare(b[0]!));
}

/** A cycle, readable: its files and the imports among them. */
export function describeCycle(component: readonly string[], edges: readonly Edge[]): string {
  const members = new Set(component);
  const inside = edges.filter((e) => members.has(e.from) && members.has(e.to));
  return `${component.length} files: ${component.join(', ')}\n      ${inside.map((e) => `${e.from} → ${e.to}${e.typeOnly ? ' (type)' : ''}`).join('\n      ')}`;
}

// ---------------------------------------------------------------------------------------------------------
// Module length

/** The number of lines of a text (a final newline does not start another). */
export const lineCount = (text: string) => (text === '' ? 0 : text.replace(/\n$/, '').split('\n').length);

/** Files over `max` lines, longest first. */
export function longModules(files: Sources, max: number): { file: string; lines: number }[] {
  return [...files]
    .map(([file, text]) => ({ file, lines: lineCount(text) }))
    .filter((f) => f.lines > max)
    .sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));
}

// ---------------------------------------------------------------------------------------------------------
// Tables named in SQL

/** Tables the migrations create: `createTable('name'`. */
export function migrationTables(migrations: Sources): string[] {
  const tables = new Set<string>();
  for (const text of migrations.values()) {
    for (const m of text.matchAll(/\bcreateTable(?:IfNotExists)?\(\s*['"`](\w+)['"`]/g)) tables.add(m[1]!);
    for (const m of text.matchAll(/\bcreate\s+table\s+(?:if\s+not\s+exists\s+)?"?(\w+)"?/gi)) tables.add(m[1]!);
  }
  return [...tables].sort();
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Whether `code`/`strings` name `table` in a SQL position: a knex builder on it (`db('t')`, `trx('t as x')`,
 * `.from('t')`, `.into('t')`, `.join('t'`, `.table('t')` and the other joins), or raw SQL in a string literal
 * (`from t`, `into t`, `update t`, `join t`, `table t`, quoted or not).
 */
export function namesTable(lexed: { code: string; strings: string[] }, table: string): boolean {
  const t = escape(table);
  const builder = new RegExp(
    `(?:\\b(?:db|trx|knex|tx|transaction|connection)|\\.(?:db|trx|knex)|\\.(?:from|into|table|join|innerJoin|leftJoin|leftOuterJoin|rightJoin|rightOuterJoin|fullOuterJoin|crossJoin)\\b)\\s*(?:<[^>()]*>)?\\(\\s*['"\`]${t}(?:\\s+as\\s+\\w+)?['"\`]`,
  );
  if (builder.test(lexed.code)) return true;
  const sql = new RegExp(`\\b(?:from|into|update|join|table)\\s+(?:only\\s+)?(?:public\\.)?"?${t}"?(?![\\w-])`, 'i');
  return lexed.strings.some((s) => sql.test(s));
}

/** table → the files that name it in SQL, for every table named by more than one file. */
export function sharedTables(files: Sources, tables: readonly string[]): Map<string, string[]> {
  const lexed = new Map([...files].map(([file, text]) => [file, lex(text)] as const));
  const shared = new Map<string, string[]>();
  for (const table of tables) {
    const users = [...lexed].filter(([, l]) => namesTable(l, table)).map(([file]) => file);
    if (users.length > 1) shared.set(table, users.sort());
  }
  return shared;
}

// ---------------------------------------------------------------------------------------------------------
// Casts of ctx.state

/** `ctx.state as …` and `ctx.state.x as …` (also `ctx.state?.x`, `ctx.state['x']`), as `file:line: text`. */
export function stateCasts(files: Sources): string[] {
  const found: string[] = [];
  const cast = /\bctx\.state(?:\??\.[\w$]+|\[[^\]\n]+\])*!?\)?\s+as\s+(?!const\b)/;
  for (const [file, text] of files) {
    const lines = lex(text).code.split('\n');
    lines.forEach((line, i) => {
      if (cast.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  return found;
}
