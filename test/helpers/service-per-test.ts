/**
 * Demo services and live clients that last one test: what the service test files start, stopped
 * by an `afterEach` this registers (clean-up steps first, then the services).
 */
import { afterEach } from 'vitest';
import {
  type LiveClientOptions,
  liveClient,
  type RunningService,
  startService,
  stopService,
} from './service.ts';

/** A quick load: 40 conversations a second, 12 at once, 1 ms a responder call. */
export const FAST = ['--rate', '40', '--concurrency', '12', '--latency-ms', '1'];

export function servicesPerTest() {
  const services: RunningService[] = [];
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
    for (const s of services.splice(0)) await stopService(s);
  });
  return {
    /** Starts a service (`FAST` by default), stopped after the test. */
    async service(
      args: string[] = FAST,
      env: NodeJS.ProcessEnv = {},
      preload: string[] = [],
    ): Promise<RunningService> {
      const s = await startService(args, env, preload);
      services.push(s);
      return s;
    },
    /** A WebSocket client of the live feed, terminated after the test. */
    client(url: string, options: LiveClientOptions = {}) {
      const c = liveClient(url, options);
      cleanups.push(() => c.ws.terminate());
      return c;
    },
    /** A step run after the test, before the services stop. */
    cleanup(step: () => Promise<void> | void): void {
      cleanups.push(step);
    },
  };
}
