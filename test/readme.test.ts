import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

describe('the README quick start', () => {
  it('runs as written and prints what the README says', async () => {
    const readme = readFileSync('README.md', 'utf8');
    const section = readme.slice(readme.indexOf('## Quick start'));
    const code = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
    expect(code).toContain("from 'conversation-orchestrator'");
    mkdirSync('.tmp', { recursive: true });
    writeFileSync('.tmp/quickstart.ts', code ?? '');
    // Imported by package name, as a user would: the package resolves itself through `exports`.
    const { stdout } = await run('npx', ['tsx', '.tmp/quickstart.ts']);
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^dispatch 24: converged after \d+\.\d\d ms$/);
    expect(lines[1]).toBe('converged 24 true');
  });
});
