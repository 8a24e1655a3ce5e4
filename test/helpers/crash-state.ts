/**
 * The checkpoint states the crash writer (store-crash-writer.ts) commits: each names its
 * conversation and seq, and its pad says its own length (up to ~20 KB, so overflow pages and
 * multi-packet values are used), so a torn or mixed write shows when it is read back.
 */

/** The state text of conversation `id` at commit `seq`. */
export function crashState(id: string, seq: number): string {
  const length = (seq * 7919) % 20_000;
  return JSON.stringify({ id, seq, length, pad: 'x'.repeat(length) });
}

/** What a state text read back says of itself: its id, its seq, and whether its pad is whole. */
export function readCrashState(text: string): { id: string; seq: number; whole: boolean } {
  const state = JSON.parse(text) as { id: string; seq: number; length: number; pad: string };
  return { id: state.id, seq: state.seq, whole: state.pad.length === state.length };
}
