/**
 * The conformance kit as vitest tests: one `it` per check, each on fresh stores from `factory`.
 * Running it on any store is one line: `describeConversationStore('my store', () => makeStore())`.
 */
import { describe, expect, it } from 'vitest';
import {
  type ConversationStoreFactory,
  conformanceCheckNames,
  verifyConversationStore,
} from '../../src/testing/index.ts';

export function describeConversationStore(title: string, factory: ConversationStoreFactory): void {
  describe(`${title} passes the conformance kit`, () => {
    for (const name of conformanceCheckNames) {
      it(name, async () => {
        const report = await verifyConversationStore(factory, { only: [name] });
        expect(report.checks.map((c) => [c.name, c.error])).toEqual([[name, undefined]]);
        expect(report.passed).toBe(true);
      }, 90_000);
    }
  });
}
