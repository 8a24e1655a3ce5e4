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
