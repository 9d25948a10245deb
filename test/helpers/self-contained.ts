import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Detectors for a repository that stands on its own: documentation and API text that points at files
 * outside it (the product specification beside the checkout, by path), or cites it by section number
 * ("spec 4.1", "contract §7") instead of linking docs/api.md; and relative markdown links, or their
 * `#anchors`, that lead nowhere. Pure functions over text, so each can be shown to find what it looks for.
 */

export interface Finding {
  readonly file: string;
  readonly line: number;
  readonly text: string;
}

/** Text that names a file outside the repository, or cites the specification by number. */
const OUTSIDE: readonly RegExp[] = [
  /(?:\.\.\/)+shared\/spec\b/i, // ../shared/spec/works-api.md
  /\/work\/shared\b/i, // the absolute path of the same
  /\bshared\/spec\//i,
  /\b(?:works-api|contract)\.md\b/i, // the specification's own file names
  /\bspec(?:ification)?(?:'s)?\s*§/i, // spec §6
  /\bspec(?:ification)?\s+\d+(?:\.\d+)*/i, // spec 4.1, specification 2.3
  /\bcontract(?:'s)?\s*\(?§/i, // contract §7, contract (§5)
  /§§/, // contract §§4–8
];

/** In TypeScript, an import or re-export names a module of this repository (`../shared/db/knex`), not a document. */
const IMPORT = /^\s*(?:import|export)\b.*\bfrom\s+['"]|^\s*import\s+['"]|\b(?:require|import)\(\s*['"]/;

/** The lines of `text` (file `file`) that point outside the repository or cite the specification by number. */
export function outsideReferences(file: string, text: string): Finding[] {
  const code = /\.[cm]?[jt]s$/.test(file);
  const findings: Finding[] = [];
  text.split('\n').forEach((line, i) => {
    if (code && IMPORT.test(line)) return;
    if (OUTSIDE.some((re) => re.test(line))) findings.push({ file, line: i + 1, text: line.trim() });
  });
  return findings;
}

/** Every string held anywhere in a JSON value (descriptions, summaries, examples…), with its JSON path. */
export function stringsOf(value: unknown, at = ''): { path: string; text: string }[] {
  if (typeof value === 'string') return [{ path: at, text: value }];
  if (Array.isArray(value)) return value.flatMap((v, i) => stringsOf(v, `${at}/${i}`));
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => stringsOf(v, `${at}/${k}`));
  return [];
}

/** Markdown lines outside fenced code blocks, with inline code spans blanked (what they hold is not a link). */
function proseLines(markdown: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fence: string | null = null;
  markdown.split('\n').forEach((raw, i) => {
    const opener = /^\s{0,3}(`{3,}|~{3,})/.exec(raw);
    if (opener) {
      if (fence === null) fence = opener[1]![0]!;
      else if (opener[1]![0] === fence) fence = null;
      return;
    }
    if (fence === null) out.push({ line: i + 1, text: raw.replace(/(`+)(?:(?!\1).)+?\1/g, (m) => ' '.repeat(m.length)) });
  });
  return out;
}

/** GitHub's anchor for a heading's text: lowercased, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text only
    .replace(/<[^>]+>/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a markdown document's headings make, numbered as GitHub numbers repeats (`x`, `x-1`, …). */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  let fence: string | null = null;
  for (const raw of markdown.split('\n')) {
    const opener = /^\s{0,3}(`{3,}|~{3,})/.exec(raw);
    if (opener) {
      if (fence === null) fence = opener[1]![0]!;
      else if (opener[1]![0] === fence) fence = null;
      continue;
    }
    const heading = fence === null ? /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(raw) : null;
    if (!heading) continue;
    const base = slug(heading[1]!.replace(/`/g, ''));
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The relative links of a markdown document (inline `[t](target)` and definitions `[t]: target`). */
export function relativeLinks(markdown: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  for (const { line, text } of proseLines(markdown)) {
    const targets = [
      ...[...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!),
      ...[...text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/g)].map((m) => m[1]!),
    ];
    for (const target of targets) if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) links.push({ line, target });
  }
  return links;
}

/**
 * The relative links of `file` (a path from the repository's root) that lead nowhere: to a file that is
 * not in the repository, out of the repository, or to an anchor that no heading of the target makes.
 * `read` gives a repository file's text, or undefined when there is none.
 */
export function brokenLinks(file: string, markdown: string, read: (repoPath: string) => string | undefined): Finding[] {
  const findings: Finding[] = [];
  for (const { line, target } of relativeLinks(markdown)) {
    const [rawPath, anchor] = target.split('#', 2) as [string, string | undefined];
    const repoPath = rawPath === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(rawPath)));
    const broken = (why: string) => findings.push({ file, line, text: `${target}: ${why}` });
    if (repoPath.startsWith('../') || path.posix.isAbsolute(repoPath)) {
      broken('outside the repository');
      continue;
    }
    const target_ = read(repoPath.replace(/\/$/, ''));
    if (target_ === undefined) {
      broken('no such file in the repository');
      continue;
    }
    if (anchor !== undefined && anchor !== '' && repoPath.endsWith('.md') && !anchorsOf(target_).has(decodeURIComponent(anchor))) {
      broken(`no heading makes #${anchor} in ${repoPath}`);
    }
  }
  return findings;
}

/** `docs/api.md#<anchor>` mentions in any text (code comments, the OpenAPI document), for checking against its headings. */
export function apiDocAnchors(text: string): string[] {
  return [...text.matchAll(/\bdocs\/api\.md#([\p{L}\p{N}_-]+)/gu)].map((m) => m[1]!);
}

/** The repository's tracked files under the given paths (`git ls-files`). */
export function trackedFiles(root: string, pathspecs: readonly string[]): string[] {
  return execFileSync('git', ['ls-files', '-z', '--', ...pathspecs], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f !== '');
}

/**
 * A reader of repository files for `brokenLinks`: the text of a tracked file, '' for a directory holding
 * tracked files, undefined otherwise (a file only on this machine is not in the repository).
 */
export function repoReader(root: string): (repoPath: string) => string | undefined {
  const tracked = new Set(trackedFiles(root, ['.']));
  const dirs = new Set(
    [...tracked].flatMap((f) =>
      f
        .split('/')
        .slice(0, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
    ),
  );
  return (repoPath) => {
    if (tracked.has(repoPath) && existsSync(path.join(root, repoPath))) return readFileSync(path.join(root, repoPath), 'utf8');
    return dirs.has(repoPath) || repoPath === '.' ? '' : undefined;
  };
}

/** Whether a file's bytes are text (no NUL in its first 8 KB). */
export const isText = (bytes: Buffer): boolean => !bytes.subarray(0, 8192).includes(0);
