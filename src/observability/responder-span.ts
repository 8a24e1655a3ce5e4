/**
 * A responder invocation's span (`invoke_agent {responder}`, with `responderSpans`): open from the
 * call until its answer settles or the conversation ends first, carrying the usage it reported.
 */
import { type Attributes, type Span, SpanStatusCode } from '@opentelemetry/api';
import type { Usage } from '../core/spi/types.ts';
import { errorMessage, errorType, exceptionRecord } from './guard.ts';
import {
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
} from './semconv.ts';

/** A responder span not yet ended, and whether it has been (a late answer must not end it again). */
export interface OpenSpan {
  readonly span: Span;
  readonly index: number;
  /** The dispatch the invocation would be: usage reports name it. */
  readonly dispatchNumber: number;
  ended: boolean;
  /** What the invocation reported so far (`onUsage`), summed; the model of the last report. */
  usage: InvocationUsage | undefined;
}

interface InvocationUsage {
  input: number;
  output: number;
  cacheRead: number | undefined;
  reasoning: number | undefined;
  model: string | undefined;
}

/** Adds a usage report of the span's invocation to what it reported before. */
export function addUsage(open: OpenSpan, usage: Usage): void {
  const sum = open.usage ?? {
    input: 0,
    output: 0,
    cacheRead: undefined,
    reasoning: undefined,
    model: undefined,
  };
  sum.input += usage.inputTokens ?? 0;
  sum.output += usage.outputTokens ?? 0;
  if (usage.cacheReadInputTokens !== undefined) {
    sum.cacheRead = (sum.cacheRead ?? 0) + usage.cacheReadInputTokens;
  }
  if (usage.reasoningOutputTokens !== undefined) {
    sum.reasoning = (sum.reasoning ?? 0) + usage.reasoningOutputTokens;
  }
  if (usage.model !== undefined) sum.model = usage.model;
  open.usage = sum;
}

/** The `gen_ai.usage.*` and `gen_ai.request.model` attributes of an invocation's reports. */
function usageAttributes(usage: InvocationUsage): Attributes {
  const attributes: Attributes = {
    [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: usage.input,
    [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: usage.output,
  };
  if (usage.cacheRead !== undefined) {
    attributes[ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cacheRead;
  }
  if (usage.reasoning !== undefined) {
    attributes[ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning;
  }
  if (usage.model !== undefined) attributes[ATTR_GEN_AI_REQUEST_MODEL] = usage.model;
  return attributes;
}

/**
 * Ends a responder span once, at `timeMs`, marking it failed when `failure` is given (`type`
 * overrides its `error.type`: the ending's reason when the conversation ended first).
 */
export function endOnce(
  open: OpenSpan,
  timeMs: number,
  report: (error: unknown) => void,
  failure?: { readonly error: unknown },
  type?: string,
): void {
  if (open.ended) return;
  open.ended = true;
  const span = open.span;
  if (open.usage !== undefined) span.setAttributes(usageAttributes(open.usage));
  if (failure !== undefined) {
    const { error } = failure;
    span.recordException(exceptionRecord(error, report), timeMs);
    span.setAttribute(ATTR_ERROR_TYPE, type ?? errorType(error));
    span.setStatus({ code: SpanStatusCode.ERROR, message: errorMessage(error) });
  }
  span.end(timeMs);
}
