/** Job options shared by producers and workers, and the defaults they document. */

import type { JobsOptions } from 'bullmq';
import { QUEUE_NAME_PATTERN } from '../core/shared/names.ts';

/** The default BullMQ queue name. */
export const DEFAULT_QUEUE_NAME = 'conversations';
/** The default BullMQ key prefix (BullMQ's own). */
export const DEFAULT_PREFIX = 'bull';
/** Name of the backoff strategy the worker registers (`settings.backoffStrategy`). */
export const BACKOFF_TYPE = 'conversation';

/** Retry delay after the n-th failed attempt: 500 ms doubling, at most 30 s. */
export function backoffDelay(attemptsMade: number): number {
  return Math.min(500 * 2 ** Math.max(0, attemptsMade - 1), 30_000);
}

/**
 * A segment fails only when the store or Redis could not be reached (a conversation's own
 * failure ends it, and the job completes): retry for as long as it takes, with backoff. Jobs are
 * kept a day after completing so a late duplicate `resume()` still finds its job name taken.
 */
export const SEGMENT_JOB_OPTIONS: JobsOptions = {
  attempts: 1_000_000,
  backoff: { type: BACKOFF_TYPE },
  removeOnComplete: { age: 24 * 3600, count: 100_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
};

/** Queue names: BullMQ refuses `:`. */
export function checkQueueName(queueName: unknown): string {
  if (typeof queueName !== 'string' || !QUEUE_NAME_PATTERN.test(queueName)) {
    throw new TypeError(
      `Expected \`queueName\` to be 1-64 characters (ASCII letters, digits, \`_\`, \`.\` or \`-\`), got ${JSON.stringify(queueName)}`,
    );
  }
  return queueName;
}
