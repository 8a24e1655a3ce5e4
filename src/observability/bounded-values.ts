/**
 * Bounded label and attribute values: a set of the distinct values in use, at most `max` of them.
 * The metrics cap their `model` and `reason` labels with it, the OpenTelemetry path its
 * `error.type` attribute; each says for itself what a value past the cap becomes.
 */

/** Whether `value` has a place among at most `max` distinct values in `seen` (taken now if new). */
export function admitted(seen: Set<string>, value: string, max: number): boolean {
  if (seen.has(value)) return true;
  if (seen.size >= max) return false;
  seen.add(value);
  return true;
}
