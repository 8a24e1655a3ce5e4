/**
 * Type-level test, checked by `npm run typecheck`: the AI SDK's own usage types (from the
 * installed `ai` 6.x and 7.x) are what `usageFromAiSdk` takes, and what it gives is a `Usage`.
 */
import type { generateText, LanguageModelUsage, streamText } from 'ai';
import { type AiSdkUsage, type Usage, usageFromAiSdk } from '../../src/index.ts';

declare const usage: LanguageModelUsage;
declare const generated: Awaited<ReturnType<typeof generateText>>;
declare const streamed: ReturnType<typeof streamText>;

export const shape: AiSdkUsage = usage;
export const fromGenerate: Usage = usageFromAiSdk(generated.usage, 'gpt-4.1-mini');
export const fromTotal: Usage = usageFromAiSdk(generated.totalUsage);
export const fromStream: Promise<Usage> = Promise.resolve(streamed.usage).then((u) =>
  usageFromAiSdk(u),
);
// `ai` 5.x's flat fields, without the details.
const five = {
  inputTokens: 10,
  outputTokens: 2,
  totalTokens: 12,
  cachedInputTokens: 4,
  reasoningTokens: 1,
};
export const fromFive: Usage = usageFromAiSdk(five);
// @ts-expect-error a count is a number, not a string
usageFromAiSdk({ inputTokens: '10' });
