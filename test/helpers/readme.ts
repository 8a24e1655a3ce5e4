import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

/** One page of the documentation: its path from the repository root and its text. */
export interface DocPage {
  readonly path: string;
  readonly text: string;
}

/**
 * The documentation as a reader finds it: README.md, then every `docs/*.md` (a new page is picked
 * up by being there), then every example's README, CONTRIBUTING.md and CHANGELOG.md.
 */
export function docPages(): DocPage[] {
  const paths = ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md'];
  const listed = (dir: string) =>
    existsSync(join(ROOT, dir)) ? readdirSync(join(ROOT, dir), { withFileTypes: true }) : [];
  for (const entry of listed('docs')) {
    if (entry.isFile() && entry.name.endsWith('.md')) paths.push(`docs/${entry.name}`);
  }
  for (const entry of listed('examples')) {
    const readme = `examples/${entry.name}/README.md`;
    if (entry.isDirectory() && existsSync(join(ROOT, readme))) paths.push(readme);
  }
  return paths.sort(byReaderOrder).map((path) => ({
    path,
    text: readFileSync(join(ROOT, path), 'utf8'),
  }));
}

function byReaderOrder(a: string, b: string): number {
  const rank = (p: string) => (p === 'README.md' ? 0 : p.startsWith('docs/') ? 1 : 2);
  return rank(a) - rank(b) || a.localeCompare(b);
}

/**
 * The first-column names (in backticks) of the table under `heading` (its level is ignored:
 * `### Metrics` finds `## Metrics`). With `page`, only that page is read; without, the heading
 * must be on exactly one page of {@link docPages}, so a moved table is still found and an
 * ambiguous one is an error rather than a guess.
 */
export function docsTableNames(heading: string, page?: string): string[] {
  const title = heading.replace(/^#+\s*/, '');
  const pages = docPages().filter((p) => page === undefined || p.path === page);
  if (page !== undefined && pages.length === 0) throw new Error(`no documentation page ${page}`);
  const found = pages.flatMap((p) => {
    const lines = p.text.split('\n');
    const at = lines.findIndex((l) => /^#{1,6} /.test(l) && l.replace(/^#+\s*/, '') === title);
    return at < 0 ? [] : [{ path: p.path, rest: lines.slice(at + 1) }];
  });
  if (found.length === 0) throw new Error(`no documentation page has the heading ${heading}`);
  if (found.length > 1) {
    throw new Error(`the heading ${heading} is on ${found.map((f) => f.path).join(', ')}`);
  }
  const names: string[] = [];
  let inTable = false;
  for (const line of found[0]?.rest ?? []) {
    if (/^#{1,6} /.test(line)) break;
    if (line.startsWith('|')) {
      inTable = true;
      const m = /^\|\s*`([^`]+)`/.exec(line);
      if (m) names.push(m[1] as string);
    } else if (inTable) break;
  }
  return names;
}

/**
 * Every backticked name in the first column of the table under `heading` on `page` (a cell may
 * hold several: `` `tracer` / `tracerProvider` ``). For option tables, whose rows can group options.
 */
export function docsTableCellNames(heading: string, page: string): string[] {
  const lines = docText(page).split('\n');
  const title = heading.replace(/^#+\s*/, '');
  const at = lines.findIndex((l) => /^#{1,6} /.test(l) && l.replace(/^#+\s*/, '') === title);
  if (at < 0) throw new Error(`${page} has no heading ${heading}`);
  const names: string[] = [];
  let inTable = false;
  for (const line of lines.slice(at + 1)) {
    if (/^#{1,6} /.test(line)) break;
    if (line.startsWith('|')) {
      inTable = true;
      const cell = line.split('|')[1] ?? '';
      for (const m of cell.matchAll(/`([^`]+)`/g)) names.push(m[1] as string);
    } else if (inTable) break;
  }
  return names;
}

/** The name the tests used before the README was split: the same search over every page. */
export const readmeTableNames = docsTableNames;

/** The text of one documentation page, e.g. `docs/service.md`. */
export function docText(page: string): string {
  const found = docPages().find((p) => p.path === page);
  if (!found) throw new Error(`no documentation page ${page}`);
  return found.text;
}

export interface ReadmeCodeBlock {
  /** The nearest heading above the block, e.g. `## Quick start`. */
  readonly heading: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly code: string;
  /**
   * Declarations the block relies on from the prose around it ("`options`: the orchestrator
   * options of the quick start"), given in an HTML comment right above the fence:
   * `<!-- context: declare const options: ...; -->`. Invisible on GitHub; compiled before the block.
   */
  readonly context?: string;
}

/** Every fenced code block of a Markdown page, in order. */
export function readmeCodeBlocks(readme: string): ReadmeCodeBlock[] {
  const lines = readme.split('\n');
  const blocks: ReadmeCodeBlock[] = [];
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (/^#{1,6} /.test(line)) heading = line;
    const fence = /^```(\w*)\s*$/.exec(line);
    if (!fence) continue;
    const end = lines.indexOf('```', i + 1);
    if (end < 0) throw new Error(`line ${i + 1}: a code block never closes`);
    const before = lines.slice(0, i).join('\n').trimEnd();
    const comment = before.endsWith('-->') ? before.slice(before.lastIndexOf('<!--')) : '';
    const context = /^<!-- context:([\s\S]*)-->$/.exec(comment)?.[1];
    blocks.push({
      heading,
      line: i + 1,
      lang: fence[1] ?? '',
      code: `${lines.slice(i + 1, end).join('\n')}\n`,
      ...(context === undefined ? {} : { context }),
    });
    i = end;
  }
  return blocks;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
export function headingSlug(heading: string): string {
  return heading
    .replace(/^#+\s*/, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor a page offers: its headings' slugs, a repeated one suffixed `-1`, `-2` … */
export function pageAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fence = !fence;
    if (fence || !/^#{1,6} /.test(line)) continue;
    const slug = headingSlug(line);
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** Link targets of a page outside code: `[text](target)` and `![alt](target)`, with their line. */
export function pageLinks(text: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  let fence = false;
  for (const [i, line] of text.split('\n').entries()) {
    if (line.startsWith('```')) fence = !fence;
    if (fence) continue;
    const prose = line.replace(/`[^`]*`/g, '``');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      links.push({ line: i + 1, target: m[1] as string });
    }
  }
  return links;
}

/**
 * What is wrong with the relative links of `page` (a path from the repository root): a file that
 * does not exist, or an anchor no heading of its page has. Absolute URLs are not followed.
 */
export function brokenLinks(page: string, text: string, root: string = ROOT): string[] {
  const problems: string[] = [];
  for (const { line, target } of pageLinks(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const [file = '', anchor] = target.split('#', 2);
    const path = join(root, page, '..', file);
    const where = `${page}:${line} ${target}`;
    if (file !== '' && !existsSync(path)) {
      problems.push(`${where}: no such file`);
      continue;
    }
    if (anchor === undefined || anchor === '' || (file !== '' && !file.endsWith('.md'))) continue;
    const anchors = pageAnchors(file === '' ? text : readFileSync(path, 'utf8'));
    if (!anchors.has(anchor)) problems.push(`${where}: no heading with that anchor`);
  }
  return problems;
}
