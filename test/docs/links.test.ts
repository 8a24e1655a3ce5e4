/**
 * Every relative link of the README, docs/ and the examples' READMEs leads somewhere: the file
 * exists, and an anchor names a heading of its page (GitHub's slugs).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { brokenLinks, docPages, headingSlug, pageAnchors } from '../helpers/readme.ts';

describe('links in the documentation', () => {
  for (const page of docPages()) {
    it(`every relative link of ${page.path} resolves`, () => {
      expect(brokenLinks(page.path, page.text)).toEqual([]);
    });
  }

  it('makes the anchors GitHub makes', () => {
    expect(headingSlug('## Options of `new ConversationOrchestrator(options)`')).toBe(
      'options-of-new-conversationorchestratoroptions',
    );
    expect(headingSlug("## The telemetry against the SDK's floor")).toBe(
      'the-telemetry-against-the-sdks-floor',
    );
    expect(headingSlug('## `/ws` messages')).toBe('ws-messages');
    expect([...pageAnchors('# A\n## B\n```sh\n# not a heading\n```\n## B\n')]).toEqual([
      'a',
      'b',
      'b-1',
    ]);
  });

  it('reports a missing file and a missing anchor, and follows no absolute URL', () => {
    const root = mkdtempSync(join(tmpdir(), 'docs-links-'));
    try {
      mkdirSync(join(root, 'docs'));
      writeFileSync(join(root, 'docs', 'there.md'), '# There\n\n## Some part\n');
      const text = [
        '[ok](there.md#some-part), [top](../README.md), [self](#here)',
        '# Here',
        '[gone](gone.md) and [wrong](there.md#no-such-part), `[code](nowhere.md)`',
        '[web](https://example.com/nowhere.md)',
      ].join('\n');
      writeFileSync(join(root, 'README.md'), '# Top\n');
      expect(brokenLinks('docs/page.md', text, root)).toEqual([
        'docs/page.md:3 gone.md: no such file',
        'docs/page.md:3 there.md#no-such-part: no heading with that anchor',
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
