/**
 * The recording format: one JSON object per line (NDJSON), one line per conversation, written by
 * the recorder when the conversation ends. `schemas/recording.schema.json` is the same format as
 * a JSON Schema; a test validates the recorder's lines against it.
 */

/** The format's version; a reader refuses lines of another major version. */
export const RECORDING_FORMAT_VERSION = 1;

/** Token counts, as the core's `UsageTotals`: non-negative integers. */
export interface RecordedUsage {
  /** Input (prompt) tokens. */
  readonly inputTokens: number;
  /** Output (completion) tokens. */
  readonly outputTokens: number;
  /** Input tokens read from a prompt cache, when any report had them. */
  readonly cacheReadInputTokens?: number;
  /** Output tokens spent on reasoning, when any report had them. */
  readonly reasoningOutputTokens?: number;
}

/** How the conversation ended, as `run()` resolved or rejected. */
export interface RecordedEnding {
  /** The result's `decision.reason`, or the error's `reason` (`error`, `aborted`, …). */
  readonly reason: string;
  /** The deciding policy's name, when a termination decision ended it. */
  readonly policy?: string;
  /** What the deciding policy measured (issue 21 part 1), when the decision said. */
  readonly observed?: number;
  /** The limit the deciding policy compared `observed` with, when the decision said. */
  readonly limit?: number;
  /** Successful dispatches of the conversation (all of them, even when `truncated`). */
  readonly dispatchCount: number;
  /** Milliseconds from the start to the end. */
  readonly elapsedMs: number;
  /** The error's class name (`ResponderError`, `PolicyError`, …) when `run()` rejected. */
  readonly error?: string;
}

/** One successful dispatch. */
export interface RecordedDispatch {
  /** The dispatch count: 1, 2, 3 … */
  readonly n: number;
  /** Milliseconds since the conversation started, unrounded (a `timeout` policy compares it). */
  readonly elapsedMs: number;
  /** Name of the responder that answered. */
  readonly responder: string;
  /** `state.lastMessage.sender` after the dispatch, when it is not `responder`. */
  readonly sender?: string;
  /** `state.queueDepth` after the dispatch. */
  readonly queueDepth: number;
  /** The tokens this dispatch's invocation reported (`DispatchInfo.usage`), when it reported any. */
  readonly tokens?: RecordedUsage;
  /**
   * `state.usage` after the dispatch, written only when it is not the previous dispatch's totals
   * plus `tokens` (the turn policy or a skipped invocation reported tokens in between).
   */
  readonly usage?: RecordedUsage;
  /** The decision's `observed`, when it had one. */
  readonly observed?: number;
  /** What `record(state)` returned, as JSON (absent when there is no `record` or it failed). */
  readonly record?: unknown;
  /** Why `record(state)` cost its field: it threw, or its value was not JSON within the budget. */
  readonly recordError?: string;
}

/** One line of a recording. */
export interface RecordedConversation {
  /** The format's version: `RECORDING_FORMAT_VERSION` when written. */
  readonly version: number;
  /** The conversation's id. */
  readonly conversationId: string;
  /** The orchestrator's `name`. */
  readonly orchestrator: string;
  /** Epoch milliseconds (`performance.timeOrigin + performance.now()`) at the start. */
  readonly startTimeMs: number;
  /** How it ended. */
  readonly ending: RecordedEnding;
  /** The conversation's usage totals (`result.usage` / `error.usage`), when anything was reported. */
  readonly usage?: RecordedUsage;
  /** Present (true) when dispatches past the recorder's cap were left out. */
  readonly truncated?: boolean;
  /** The recorded dispatches, in order, `n` = 1 … (fewer than `ending.dispatchCount` when truncated). */
  readonly dispatches: readonly RecordedDispatch[];
}
