/** Helpers of the observability plugin: resolved settings, content truncation, span endings. */
import {
  type Attributes,
  type DiagLogger,
  type Span,
  SpanStatusCode,
  type Tracer,
} from '@opentelemetry/api';
import type { ConversationState } from '../core/types.ts';
import { fail } from '../core/validate.ts';
import type { OrchestratorMetrics } from './metrics.ts';

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
}

/** Ends a responder span, marking it failed when `error` is given. */
export function endResponderSpan(span: Span, error: unknown): void {
  if (error !== undefined) {
    span.recordException(error instanceof Error ? error : String(error));
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
  }
  span.end();
}

let attributesFailureReported = false;
/** `stateAttributes(state)`, or undefined if it throws (reported once). */
export function safeAttributes<S, C>(
  settings: Settings<S, C>,
  state: ConversationState<S, C>,
): Attributes | undefined {
  if (settings.stateAttributes === undefined) return undefined;
  try {
    return settings.stateAttributes(state);
  } catch (error) {
    if (!attributesFailureReported) {
      attributesFailureReported = true;
      settings.logger.warn(
        'conversation-orchestrator: stateAttributes threw; the dispatch event is recorded without them',
        error,
      );
    }
    return undefined;
  }
}

/** Content as a string, cut to `max` characters (the cut ends with `…`). */
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
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
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
