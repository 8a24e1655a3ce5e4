/**
 * Which trace ids the histograms may show as exemplars. A conversation sampler given a registry
 * registers here what it kept (and an export tracker what its exporter delivered); the telemetry
 * on the same registry then writes a conversation's exemplars only once its trace is kept (or
 * exported), so an exemplar never points at a trace that was dropped or never arrived. Without
 * either on the registry nothing changes.
 *
 * A conversation can end before its trace is decided (an inner conversation, run by a responder
 * of an outer one, ends while the outer runs): its exemplars are then deferred, held by whoever
 * decides (within its bounds) and written once, if the trace is kept, or let go.
 */
import type { PrometheusRegistry } from './registry.ts';

/** Answers whether the trace was kept (exported). */
export type ExemplarFilter = (traceId: string) => boolean;

/**
 * Holds `write` until the trace is decided: called once if it is kept (exported), never
 * otherwise. Answers false when the trace is not waiting for a decision here (the caller then
 * writes nothing).
 */
export type ExemplarDefer = (traceId: string, write: () => void) => boolean;

/** What one sampler or tracker registers. */
export interface ExemplarGate {
  readonly kept: ExemplarFilter;
  readonly defer?: ExemplarDefer;
  /**
   * An export tracker's gate: it alone decides when one is registered (an exported trace was
   * kept by the sampler in front of the exporter, which the tracker sees behind it).
   */
  readonly exported?: boolean;
}

interface Gates {
  readonly gates: Set<ExemplarGate>;
  /** The gates that decide: the export trackers if any, else the samplers (kept current). */
  deciding: readonly ExemplarGate[];
  readonly filter: ExemplarFilter;
  readonly defer: ExemplarDefer;
}

const byRegistry = new WeakMap<PrometheusRegistry, Gates>();

function gatesOf(registry: PrometheusRegistry): Gates {
  let gates = byRegistry.get(registry);
  if (gates === undefined) {
    const own: Gates = {
      gates: new Set(),
      deciding: [],
      filter: (traceId) => {
        for (const g of own.deciding) if (g.kept(traceId)) return true;
        return false;
      },
      defer: (traceId, write) => {
        for (const g of own.deciding) if (g.defer?.(traceId, write) === true) return true;
        return false;
      },
    };
    gates = own;
    byRegistry.set(registry, gates);
  }
  return gates;
}

function update(gates: Gates): void {
  const all = [...gates.gates];
  const exported = all.filter((g) => g.exported === true);
  gates.deciding = exported.length > 0 ? exported : all;
}

/** Registers `kept` (a filter or a gate) for `registry`'s exemplars; the returned function removes it. */
export function addExemplarFilter(
  registry: PrometheusRegistry,
  kept: ExemplarFilter | ExemplarGate,
): () => void {
  const gates = gatesOf(registry);
  const gate: ExemplarGate = typeof kept === 'function' ? { kept } : kept;
  gates.gates.add(gate);
  update(gates);
  return () => {
    gates.gates.delete(gate);
    update(gates);
  };
}

/** The filter of `registry`'s exemplars, or undefined when nothing registered one. */
export function exemplarFilterOf(registry: PrometheusRegistry): ExemplarFilter | undefined {
  const gates = byRegistry.get(registry);
  return gates !== undefined && gates.gates.size > 0 ? gates.filter : undefined;
}

/** Defers exemplars of a trace not decided yet to whoever decides it; false when nobody holds them. */
export function exemplarDeferOf(registry: PrometheusRegistry): ExemplarDefer {
  return gatesOf(registry).defer;
}
