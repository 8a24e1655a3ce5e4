/**
 * The API reference (TypeDoc, typedoc.config.mjs) as a newcomer opens it: a landing page that
 * says what each entry point is, by its import path, with links to the guides; modules named by
 * import path, from package.json `exports`; members grouped by kind, errors apart.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const out = mkdtempSync(join(tmpdir(), 'api-reference-'));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, unknown>;
};

beforeAll(async () => {
  // --disableSources: source links need a git remote, which a checkout may not have.
  await promisify(execFile)(
    process.execPath,
    [
      join(ROOT, 'tools/api-docs/node_modules/typedoc/bin/typedoc'),
      '--out',
      out,
      '--disableSources',
    ],
    { cwd: ROOT },
  );
}, 120_000);
afterAll(() => rmSync(out, { recursive: true, force: true }));

const page = (path: string) => readFileSync(join(out, path), 'utf8');
const headings = (html: string) =>
  [...html.matchAll(/<h2 class="tsd-anchor-link" id="[^"]*">([^<]+)/g)].map((m) => m[1]);

describe('the API reference', () => {
  it('names every entry point of package.json exports by its import path', async () => {
    const plugin = '../../tools/api-docs/typedoc-entry-names.mjs';
    const { importPaths } = (await import(plugin)) as {
      importPaths: Map<string, string>;
    };
    const expected = Object.keys(pkg.exports)
      .filter((key) => {
        const target = pkg.exports[key];
        const file = typeof target === 'string' ? target : (target as { import?: string }).import;
        return typeof file === 'string' && file.startsWith('./dist/');
      })
      .map((key) => (key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`));
    expect([...importPaths.values()]).toEqual(expected);
    expect(expected).toEqual(
      expect.arrayContaining(['conversation-orchestrator', 'conversation-orchestrator/replay']),
    );
    const modules = page('modules.html');
    for (const name of expected) expect(modules).toContain(`>${name}</a>`);
    expect(modules).not.toMatch(/>(index|replay|observability)<\/a>/);
  });

  it('opens on an overview: each entry point by import path, with links to the guides that exist', () => {
    const index = page('index.html');
    expect(index).toContain('<code>conversation-orchestrator/replay</code>');
    expect(index).toContain('<code>conversation-orchestrator/observability</code>');
    const links = [...index.matchAll(/href="(media\/[^"]+\.md)"/g)].map((m) => m[1] as string);
    expect(links.sort()).toEqual(
      ['install', 'loop', 'ops', 'replay', 'sampling', 'telemetry'].map((g) => `media/${g}.md`),
    );
    for (const link of links) expect(existsSync(join(out, link))).toBe(true);
  });

  it('groups each module by kind, with the errors apart from the other classes', () => {
    const core = page('modules/conversation-orchestrator.html');
    expect(headings(core)).toEqual([
      'Classes',
      'Errors',
      'Functions',
      'Interfaces',
      'Type Aliases',
      'Variables',
    ]);
    const errors = core.slice(core.indexOf('id="errors"'), core.indexOf('id="functions"'));
    expect(errors).toContain('OrchestratorConfigError');
    const classes = core.slice(core.indexOf('id="classes"'), core.indexOf('id="errors"'));
    expect(classes).toContain('ConversationOrchestrator');
    expect(classes).not.toContain('OrchestratorConfigError');
    const replay = page('modules/conversation-orchestrator_replay.html');
    expect(headings(replay)[0]).toBe('Errors');
    expect(replay.slice(replay.indexOf('id="errors"'), replay.indexOf('id="functions"'))).toContain(
      'RecordingFormatError',
    );
  });
});
