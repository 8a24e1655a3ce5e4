/**
 * The demo service's arguments for a brisk load, the one the tests that want many conversations
 * in a few seconds run it with: 60 conversations a second, 16 at once, each desk answering after
 * 1 ms.
 */
export const BRISK_LOAD: readonly string[] = [
  '--rate',
  '60',
  '--concurrency',
  '16',
  '--latency-ms',
  '1',
];
