/**
 * Rate-limited process warnings: a hook or listener that fails on every dispatch must neither
 * flood the log nor go silent after its first failure. Each report says how many were held back.
 */

import { RateLimit } from './rate-limit.ts';

/** Returns a reporter that emits at most one warning of `type` per `intervalMs`. */
export function rateLimitedWarning(type: string, intervalMs = 60_000): (message: string) => void {
  const limit = new RateLimit(intervalMs);
  return (message) => {
    const held = limit.pass();
    if (held === undefined) return;
    const note =
      held > 0
        ? ` (${held} more since the last report)`
        : ` (at most one report per ${intervalMs / 1000} s)`;
    process.emitWarning(`${message}${note}`, type);
  };
}

/** Policy names already warned of: a policy without `save` is started afresh on resume. */
const warnedUnsaved = new Set<string>();

/** Warns once per policy name that a resumed conversation restarts a policy that saves nothing. */
export function warnUnsaved(kind: string, name: string): void {
  const key = `${kind}:${name}`;
  if (warnedUnsaved.has(key)) return;
  warnedUnsaved.add(key);
  process.emitWarning(
    `The ${kind} policy \`${name}\` has no save(): a resumed conversation starts it afresh (give its started function a save() and read the saved value in start()); see docs/durability.md`,
    'ConversationResumeWarning',
  );
}
