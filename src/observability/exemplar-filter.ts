/**
 * Which trace ids the histograms may show as exemplars. A conversation sampler given a registry
 * registers here what it kept; the telemetry on the same registry then writes a conversation's
 * exemplars only once its trace is decided and kept, so an exemplar never points at a trace that
 * was dropped (or not yet exported). Without a sampler on the registry nothing changes.
 */
import type { PrometheusRegistry } from './registry.ts';

/** Answers whether the trace was kept (exported). */
export type ExemplarFilter = (traceId: string) => boolean;

interface Filters {
  readonly kept: Set<ExemplarFilter>;
  /** Kept by any sampler of the registry. */
  readonly any: ExemplarFilter;
}

const byRegistry = new WeakMap<PrometheusRegistry, Filters>();

/** Registers `kept` for `registry`'s exemplars; the returned function removes it. */
export function addExemplarFilter(registry: PrometheusRegistry, kept: ExemplarFilter): () => void {
  let filters = byRegistry.get(registry);
  if (filters === undefined) {
    const set = new Set<ExemplarFilter>();
    filters = {
      kept: set,
      any: (traceId) => {
        for (const f of set) if (f(traceId)) return true;
        return false;
      },
    };
    byRegistry.set(registry, filters);
  }
  filters.kept.add(kept);
  const own = filters;
  return () => {
    own.kept.delete(kept);
  };
}

/** The filter of `registry`'s exemplars, or undefined when no sampler registered one. */
export function exemplarFilterOf(registry: PrometheusRegistry): ExemplarFilter | undefined {
  const filters = byRegistry.get(registry);
  return filters !== undefined && filters.kept.size > 0 ? filters.any : undefined;
}
