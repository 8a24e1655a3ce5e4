import { defineConfig } from 'vitest/config';

/**
 * Files that measure (heap after a forced collection, event-loop gaps, throughput, latency bounds
 * under load) or hold the machine's cores themselves (a browser, a fleet of worker processes):
 * run one at a time, after the rest, so that no other file competes with what they measure.
 */
const ALONE = [
  'test/core/memory-flat.test.ts',
  'test/replay/scale.test.ts',
  'test/stores/sqlite-busy.test.ts',
  // The demo service's tests start it as processes, kill them and time what follows (a resume
  // within the lease, a launcher taking its child down): run beside other files, two of them
  // failed on a fresh clone (a resumed conversation not ended in time, a killed child not reaped).
  'test/service/**/*.test.ts',
  'test/fleet/crash.test.ts',
  'test/package/install-matrix.test.ts',
  // Compares two scrape paths of one process within two scrape intervals: beside another file on
  // a loaded machine it failed once, alone it passed (8 of 8).
  'test/ops/otel-sdk.test.ts',
];

const shared = {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  // The memory tests measure the heap after a forced collection.
  execArgv: ['--expose-gc'],
};

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          ...shared,
          name: 'parallel',
          include: ['test/**/*.test.ts'],
          exclude: ALONE,
          // Two files at a time on the 2-core machine: most of a file's time is spent waiting on
          // servers and processes it started (each on its own free port and folder).
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...shared,
          name: 'alone',
          include: ALONE,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
