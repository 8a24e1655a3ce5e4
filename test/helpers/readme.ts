import { readFileSync } from 'node:fs';

/** The first-column names (in backticks) of the table under `heading` in the README. */
export function readmeTableNames(heading: string): string[] {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`README has no heading ${heading}`);
  const rest = readme.slice(start + heading.length + 2);
  const lines = rest.split('\n');
  const names: string[] = [];
  let inTable = false;
  for (const line of lines) {
    if (line.startsWith('|')) {
      inTable = true;
      const m = /^\|\s*`([^`]+)`/.exec(line);
      if (m) names.push(m[1] as string);
    } else if (inTable) break;
  }
  return names;
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

/** Every fenced code block of the README, in order. */
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
    if (end < 0) throw new Error(`README line ${i + 1}: a code block never closes`);
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
