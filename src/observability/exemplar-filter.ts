/**
 * Which trace ids the histograms may show as exemplars: only traces the exporter delivered. An
 * export tracker given a registry registers here what its exporter delivered; the telemetry on
 * that registry writes a conversation's exemplars only once a batch of its trace is delivered, so
 * an exemplar never points at a trace that was dropped, is still queued, or never arrived.
 *
 * Nothing else can say that: a sampler's keep is not a delivery (with the collector refusing
 * connections, every kept trace is lost), and neither is the SDK's sampled flag. With no tracker
 * on the registry the telemetry writes no exemplars (and says so once through its logger).
 *
 * A conversation usually ends before its trace's last batch goes out (the batch processor
 * exports on a timer; an inner conversation ends while the outer one runs): its exemplars are
 * then deferred, held by the tracker (within its bounds) and written once, if a batch of the
 * trace is delivered, or let go when it fails.
 */
import type { PrometheusRegistry } from './registry.ts';

/** Answers whether a batch of the trace was delivered. */
export type ExemplarFilter = (traceId: string) => boolean;

/**
 * Holds `write` until the trace's export is known: called once if a batch of it is delivered,
 * never otherwise. Answers false when nobody holds it (the caller then writes nothing).
 */
export type ExemplarDefer = (traceId: string, write: () => void) => boolean;

/** What one export tracker registers. */
export interface ExemplarGate {
  readonly kept: ExemplarFilter;
  readonly defer?: ExemplarDefer;
}

interface Gates {
  readonly gates: Set<ExemplarGate>;
  readonly filter: ExemplarFilter;
  readonly defer: ExemplarDefer;
}

const byRegistry = new WeakMap<PrometheusRegistry, Gates>();

function gatesOf(registry: PrometheusRegistry): Gates {
  let gates = byRegistry.get(registry);
  if (gates === undefined) {
    const own: Gates = {
      gates: new Set(),
      filter: (traceId) => {
        for (const g of own.gates) if (g.kept(traceId)) return true;
        return false;
      },
      defer: (traceId, write) => {
        for (const g of own.gates) if (g.defer?.(traceId, write) === true) return true;
        return false;
      },
    };
    gates = own;
    byRegistry.set(registry, gates);
  }
  return gates;
}

/** Registers `kept` (a filter or a gate) for `registry`'s exemplars; the returned function removes it. */
export function addExemplarFilter(
  registry: PrometheusRegistry,
  kept: ExemplarFilter | ExemplarGate,
): () => void {
  const gates = gatesOf(registry);
  const gate: ExemplarGate = typeof kept === 'function' ? { kept } : kept;
  gates.gates.add(gate);
  return () => {
    gates.gates.delete(gate);
  };
}

/** The filter of `registry`'s exemplars, or undefined when no export tracker is on it (no exemplars). */
export function exemplarFilterOf(registry: PrometheusRegistry): ExemplarFilter | undefined {
  const gates = byRegistry.get(registry);
  return gates !== undefined && gates.gates.size > 0 ? gates.filter : undefined;
}

/** Defers exemplars of a trace not delivered yet to whoever hears its export; false when nobody holds them. */
export function exemplarDeferOf(registry: PrometheusRegistry): ExemplarDefer {
  return gatesOf(registry).defer;
}
