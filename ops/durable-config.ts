/**
 * The checks of the options of the alerts on endings the SLOs cannot see and on durable
 * conversations and fleets: shares in (0, 1), windows and ages that are Prometheus durations,
 * rates that are not negative.
 */
import { duration, expect, ratio } from './check.ts';
import type { OpsConfig } from './config-types.ts';

/** Throws an `OpsConfigError` for the first of these options that is wrong. */
export function checkDurable(config: OpsConfig): void {
  ratio('excludedEndings.share', config.excludedEndings.share);
  duration('excludedEndings.window', config.excludedEndings.window);
  ratio('wedgedConversations.share', config.wedgedConversations.share);
  duration('wedgedConversations.window', config.wedgedConversations.window);
  const perSecond = config.leaseConflicts.perSecond;
  expect(
    typeof perSecond === 'number' && Number.isFinite(perSecond) && perSecond >= 0,
    'leaseConflicts.perSecond',
    'a non-negative number of conflicts per second',
    perSecond,
  );
  duration('suspendedConversations.maxAge', config.suspendedConversations.maxAge);
  duration('queueWait.maxWait', config.queueWait.maxWait);
}
