/**
 * Which sampler saw a conversation span start, by the span object: the telemetry asks at each
 * checkpoint of a durable conversation whether its trace was kept, and saves the answer, so a
 * later segment (in any process) is kept too. Weak: it holds nothing the span does not.
 */

/** What the telemetry asks of the sampler. */
interface KeptLookup {
  kept(traceId: string): boolean;
}

const samplerOf = new WeakMap<object, KeptLookup>();

/** The sampler saw `span` (a conversation span) start. */
export function sampledBy(span: object, sampler: KeptLookup): void {
  samplerOf.set(span, sampler);
}

/** Whether the sampler that saw `span` start has kept its trace (false without a sampler). */
export function keptBySampler(span: { spanContext(): { traceId: string } }): boolean {
  const sampler = samplerOf.get(span);
  if (sampler === undefined) return false;
  try {
    return sampler.kept(span.spanContext().traceId);
  } catch {
    return false;
  }
}
