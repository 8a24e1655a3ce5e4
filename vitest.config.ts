import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // The integration tests start servers and Prometheus; keep the 2-core machine calm.
    fileParallelism: false,
    // The memory tests measure the heap after a forced collection.
    execArgv: ['--expose-gc'],
  },
});
