/**
 * A context with a span active, made for one conversation (or one responder call).
 *
 * `trace.setSpan(parent, span)` builds the API's `BaseContext`: a copy of the parent's `Map` and
 * three closures per context. Measured with a span of 100 events per conversation, building one
 * per conversation made V8 keep the conversation's span and events alive through young-generation
 * collections (a major collection every few hundred conversations instead of none) and roughly
 * doubled what writing the span cost. This context holds the parent and the span instead, answers
 * the span's key itself and hands every other key to the parent; the first `setValue` or
 * `deleteValue` (a span started under it, `suppressTracing`, a baggage entry) builds the API's
 * own context once and goes on from there. (Its three closures, which the API's context has too,
 * showed no such effect when measured the same way.)
 *
 * The span's key is learned from the API rather than copied: `trace.setSpan` stores the span with
 * `context.setValue(key, span)`, so a probe context records the key it is given. Should an API
 * ever do otherwise, `contextWithSpan` falls back to `trace.setSpan`.
 */
import { type Context, INVALID_SPAN_CONTEXT, type Span, trace } from '@opentelemetry/api';

function learnSpanKey(): symbol | undefined {
  let key: symbol | undefined;
  let calls = 0;
  const probe: Context = {
    getValue: () => undefined,
    setValue(k) {
      key = k;
      calls++;
      return probe;
    },
    deleteValue: () => probe,
  };
  try {
    const span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
    trace.setSpan(probe, span);
    // Trusted only if the API stored the span under one key that reads it back.
    return calls === 1 && typeof key === 'symbol' ? key : undefined;
  } catch {
    return undefined;
  }
}

const SPAN_KEY = learnSpanKey();

/** Where a lean context keeps its parent, so that a context made over it can skip it. */
const LEAN_PARENT: unique symbol = Symbol('conversation-orchestrator span context parent');

interface LeanContext extends Context {
  readonly [LEAN_PARENT]: Context;
}

/**
 * `parent` with `span` active: what `trace.setSpan(parent, span)` answers, built lazily. Like the
 * API's own context, its functions are closures (they work detached, through a Proxy or copied
 * with a spread). Made over another lean context (a conversation started inside another one),
 * it goes to that one's parent: its own span replaces the other's, every other key answers the
 * same, and the chain stays one link long whatever the number of conversations in a row.
 */
export function contextWithSpan(parent: Context, span: Span): Context {
  const key = SPAN_KEY;
  if (key === undefined) return trace.setSpan(parent, span);
  const base = (parent as Partial<LeanContext>)[LEAN_PARENT] ?? parent;
  let built: Context | undefined;
  const build = (): Context => {
    built ??= trace.setSpan(base, span);
    return built;
  };
  const lean: LeanContext = {
    getValue: (k) => (k === key ? span : base.getValue(k)),
    setValue: (k, value) => build().setValue(k, value),
    deleteValue: (k) => build().deleteValue(k),
    [LEAN_PARENT]: base,
  };
  return lean;
}

/** Whether the span's key was learned (tests: the lean context is in use). */
export const LEAN_SPAN_CONTEXT = SPAN_KEY !== undefined;
