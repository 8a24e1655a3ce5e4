/**
 * The Vercel AI SDK's usage object as the orchestrator takes it. Typed by shape: the core imports
 * nothing of `ai`, so this costs an app that does not use the AI SDK nothing, and works with
 * whichever copy of `ai` (5.x or 6.x) the app has.
 */
import type { Usage } from '../spi/types.ts';

/**
 * The fields of the AI SDK's `LanguageModelUsage` (`result.usage` of `generateText`,
 * `await result.usage` of `streamText`) that `usageFromAiSdk` reads: `ai` 6.x and 7.x's token details,
 * and `ai` 5.x's flat `cachedInputTokens` and `reasoningTokens` where the details are absent.
 * Every field may be missing or undefined: providers report what they know.
 */
export interface AiSdkUsage {
  /** Input (prompt) tokens in total. */
  readonly inputTokens?: number | undefined;
  /** Output (completion) tokens in total, reasoning included. */
  readonly outputTokens?: number | undefined;
  /** `ai` 6.x and 7.x: the input tokens by kind. */
  readonly inputTokenDetails?:
    | {
        /** Cached input tokens read. */
        readonly cacheReadTokens?: number | undefined;
      }
    | undefined;
  /** `ai` 6.x and 7.x: the output tokens by kind. */
  readonly outputTokenDetails?:
    | {
        /** Reasoning tokens (part of `outputTokens`). */
        readonly reasoningTokens?: number | undefined;
      }
    | undefined;
  /** `ai` 5.x (deprecated in 6.x): cached input tokens read. */
  readonly cachedInputTokens?: number | undefined;
  /** `ai` 5.x (deprecated in 6.x): reasoning tokens. */
  readonly reasoningTokens?: number | undefined;
}

/**
 * The AI SDK's usage of one model call as a report for `context.reportUsage`: only the counts
 * the provider gave (input, output, cache reads, reasoning), and `model` when given (the model's
 * id, the `gen_ai.request.model` of the telemetry). It checks nothing itself: `reportUsage`
 * refuses a count that is not a non-negative integer, naming the field.
 * @example
 * const result = await generateText({ model, prompt, abortSignal: context.signal });
 * context.reportUsage(usageFromAiSdk(result.usage, model.modelId));
 */
export function usageFromAiSdk(usage: AiSdkUsage, model?: string): Usage {
  const report: { -readonly [K in keyof Usage]: Usage[K] } = {};
  if (model !== undefined) report.model = model;
  if (usage.inputTokens !== undefined) report.inputTokens = usage.inputTokens;
  if (usage.outputTokens !== undefined) report.outputTokens = usage.outputTokens;
  const cacheRead = usage.inputTokenDetails?.cacheReadTokens ?? usage.cachedInputTokens;
  if (cacheRead !== undefined) report.cacheReadInputTokens = cacheRead;
  const reasoning = usage.outputTokenDetails?.reasoningTokens ?? usage.reasoningTokens;
  if (reasoning !== undefined) report.reasoningOutputTokens = reasoning;
  return report;
}
