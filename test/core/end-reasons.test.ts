/**
 * End reasons live in one table (src/core/spi/end-reasons.ts): the core's reserved reasons, the
 * telemetry's label values and initialized series, the sampler's keep rules and the ops bundle's
 * recording rules are read from it, and the docs' reason table lists the same reasons.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { END_REASONS, endReasons } from '../../src/core/spi/end-reasons.ts';
import { isReasonName, RESERVED_REASONS } from '../../src/core/spi/policy.ts';
import { BUILT_IN_REASONS } from '../../src/observability/index.ts';

describe('the end reasons table', () => {
  it('names each reason once, in snake_case', () => {
    const reasons = END_REASONS.map((r) => r.reason);
    expect(new Set(reasons).size).toBe(reasons.length);
    for (const r of reasons) expect(r).toMatch(/^[a-z][a-z0-9_]{0,39}$/);
  });

  it('reserves the loop’s own reasons: no termination policy may end with them', () => {
    for (const { reason, decidedBy } of END_REASONS) {
      expect(RESERVED_REASONS.includes(reason)).toBe(decidedBy === 'loop');
      expect(isReasonName(reason)).toBe(decidedBy === 'policy');
    }
    expect(RESERVED_REASONS).toContain('continue');
  });

  it('gives the telemetry every reason as its own label value', () => {
    expect([...BUILT_IN_REASONS].sort()).toEqual(END_REASONS.map((r) => r.reason).sort());
  });

  it('says a failure is also unconverged, and nothing both unremarkable and kept', () => {
    for (const r of END_REASONS) {
      if (r.failed) expect(r.unconverged).toBe(true);
      if (r.unremarkable) expect(r.failed || r.unconverged).toBe(false);
    }
    expect(endReasons((r) => r.failed)).toEqual(['deadline', 'error', 'queue_overflow']);
    expect(endReasons((r) => r.unremarkable)).toEqual(['converged', 'queue_exhausted']);
  });

  it('is what the committed recording rules match on', () => {
    const rules = readFileSync('prometheus/rules/orchestrator.rules.yml', 'utf8');
    expect(rules).toContain(`reason=~"${endReasons((r) => r.failed).join('|')}"`);
    expect(rules).toContain(`reason=~"${endReasons((r) => r.unconverged).join('|')}"`);
  });

  it('is the list of reasons docs/loop.md’s endings table gives', () => {
    const docs = readFileSync('docs/loop.md', 'utf8');
    const table = docs.slice(
      docs.indexOf('## Endings'),
      docs.indexOf('\n\n', docs.indexOf('| reason')),
    );
    for (const { reason } of END_REASONS) expect(table).toContain(`\`${reason}\``);
  });
});
