/** Helpers of the observability plugin: resolved settings, content truncation, span endings. */
import {
  type Attributes,
  type AttributeValue,
  type DiagLogger,
  type Span,
  SpanStatusCode,
  type Tracer,
} from '@opentelemetry/api';
import { describeValue } from '../core/errors.ts';
import type { ConversationState } from '../core/types.ts';
import { fail } from '../core/validate.ts';
import type { StoragePool } from './dispatch-events.ts';
import type { OrchestratorMetrics } from './metrics.ts';
import { ATTR_ERROR_TYPE, ERROR_TYPE_OTHER } from './semconv.ts';

/** The resolved options, shared by a telemetry and its conversations. */
export interface Settings<S, C> {
  readonly tracer: Tracer;
  readonly metrics: OrchestratorMetrics | undefined;
  readonly stateAttributes: ((state: ConversationState<S, C>) => Attributes) | undefined;
  readonly captureContent: boolean;
  readonly maxContentLength: number;
  readonly maxDispatchEvents: number;
  readonly responderSpans: boolean;
  readonly exemplars: boolean;
  readonly logger: DiagLogger;
  /** Reports a throwing (or non-object-returning) `stateAttributes`, rate-limited. */
  readonly reportAttributesFailure: (error: unknown) => void;
  /** Kept-dispatch storage that ended conversations hand on to new ones. */
  readonly eventStorage: StoragePool;
}

/** `error.type` of a thrown value: its class name, or `_OTHER` for a non-Error value. */
export function errorType(error: unknown): string {
  if (error instanceof Error) return error.name || error.constructor.name || ERROR_TYPE_OTHER;
  return ERROR_TYPE_OTHER;
}

/**
 * Ends a responder span, marking it failed when `failure` is given. `errorTypeValue` overrides
 * the `error.type` (the ending's reason when the conversation ended first).
 */
export function endResponderSpan(
  span: Span,
  failure: { readonly error: unknown } | undefined,
  errorTypeValue?: string,
): void {
  if (failure !== undefined) {
    const { error } = failure;
    span.recordException(error instanceof Error ? error : String(error));
    span.setAttribute(ATTR_ERROR_TYPE, errorTypeValue ?? errorType(error));
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
  }
  span.end();
}

/**
 * A reporter that says the first failure at once and then at most one line per `intervalMs`
 * with how many were left unsaid: a hook failing on every dispatch must not flood the log, and
 * must not go silent either.
 */
export function rateLimited(
  logger: DiagLogger,
  message: string,
  intervalMs = 10_000,
  now: () => number = Date.now,
): (error: unknown) => void {
  let last = Number.NEGATIVE_INFINITY;
  let unsaid = 0;
  return (error) => {
    const t = now();
    if (t - last < intervalMs) {
      unsaid++;
      return;
    }
    last = t;
    const more = unsaid > 0 ? ` (${unsaid} more since the last report)` : '';
    unsaid = 0;
    logger.warn(`${message}${more}`, error);
  };
}

/**
 * `stateAttributes(state)` as a copy taken now, or undefined if it throws (reported through the
 * logger, rate-limited). The copy matters: the events are written when the conversation ends, and
 * a function that reuses and mutates one object must not rewrite the earlier events.
 */
export function safeAttributes<S, C>(
  settings: Settings<S, C>,
  state: ConversationState<S, C>,
): Attributes | undefined {
  const compute = settings.stateAttributes;
  if (compute === undefined) return undefined;
  let attributes: Attributes;
  try {
    attributes = compute(state);
  } catch (error) {
    settings.reportAttributesFailure(error);
    return undefined;
  }
  if (typeof attributes !== 'object' || attributes === null) {
    settings.reportAttributesFailure(
      new TypeError(
        `Expected \`stateAttributes\` to return an object of attributes, got ${describeValue(attributes)}`,
      ),
    );
    return undefined;
  }
  const copy: Attributes = {};
  for (const key in attributes) {
    const value = attributes[key];
    copy[key] = Array.isArray(value) ? (value.slice() as AttributeValue) : value;
  }
  return copy;
}

/**
 * Content as a string, cut to `max` UTF-16 code units (JavaScript string length), the cut ending
 * with `…`. A cut never splits a surrogate pair, and lone surrogates become U+FFFD, so the
 * exported text is always valid UTF-8.
 */
export function truncate(content: unknown, max: number): string {
  let text: string;
  if (typeof content === 'string') text = content;
  else {
    try {
      text = JSON.stringify(content) ?? String(content);
    } catch {
      text = String(content);
    }
  }
  if (text.length > max) {
    let cut = max - 1;
    // A high surrogate just before the cut would lose its low half.
    const last = text.charCodeAt(cut - 1);
    if (last >= 0xd800 && last <= 0xdbff) cut--;
    text = `${text.slice(0, cut)}…`;
  }
  return wellFormed(text);
}

/** `String.prototype.toWellFormed` (ES2024, Node 20) without widening the compile target. */
function wellFormed(text: string): string {
  const s = text as string & { isWellFormed(): boolean; toWellFormed(): string };
  return s.isWellFormed() ? text : s.toWellFormed();
}

/** Validated bucket bounds, or the default. */
export function bucketList(
  option: string,
  value: readonly number[] | undefined,
  fallback: readonly number[],
): readonly number[] {
  if (value === undefined) return fallback;
  if (
    !Array.isArray(value) ||
    value.length === 0 ||
    !value.every(
      (v, i) =>
        typeof v === 'number' && Number.isFinite(v) && (i === 0 || v > (value[i - 1] as number)),
    )
  ) {
    fail(option, 'a non-empty array of finite numbers in increasing order', value);
  }
  return [...value];
}
