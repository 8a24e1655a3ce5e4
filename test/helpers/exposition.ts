/** Reading a Prometheus exposition in a test. */
import { expect } from 'vitest';

/** The exposition `text` holds each of `lines` (each failure names its line). */
export function expectLines(text: string, lines: readonly string[]): void {
  for (const line of lines) expect(text, line).toContain(line);
}
