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
 * own context once and goes on from there.
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

class SpanActiveContext implements Context {
  readonly #parent: Context;
  readonly #span: Span;
  #built: Context | undefined;

  constructor(parent: Context, span: Span) {
    this.#parent = parent;
    this.#span = span;
  }

  getValue(key: symbol): unknown {
    return key === SPAN_KEY ? this.#span : this.#parent.getValue(key);
  }

  setValue(key: symbol, value: unknown): Context {
    return this.#build().setValue(key, value);
  }

  deleteValue(key: symbol): Context {
    return this.#build().deleteValue(key);
  }

  #build(): Context {
    this.#built ??= trace.setSpan(this.#parent, this.#span);
    return this.#built;
  }
}

/** `parent` with `span` active: what `trace.setSpan(parent, span)` answers, built lazily. */
export function contextWithSpan(parent: Context, span: Span): Context {
  return SPAN_KEY === undefined ? trace.setSpan(parent, span) : new SpanActiveContext(parent, span);
}

/** Whether the span's key was learned (tests: the lean context is in use). */
export const LEAN_SPAN_CONTEXT = SPAN_KEY !== undefined;
