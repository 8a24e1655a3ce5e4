/**
 * The default bucket bounds of the orchestrator's histograms (`TelemetryOptions` and the durable
 * metrics), exported from the package's observability entry point.
 */
/** Sub-microsecond algorithmic agents to minute-long LLM calls, in seconds. */
export const DEFAULT_DISPATCH_DURATION_BUCKETS = [
  0.000001, 0.000005, 0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
  2.5, 5, 10, 30, 60,
] as const;
/** Milliseconds to ten minutes, in seconds. */
export const DEFAULT_CONVERSATION_DURATION_BUCKETS = [
  0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
] as const;
/** Tokens (input + output) per conversation: a short exchange to a runaway one. */
export const DEFAULT_CONVERSATION_TOKEN_BUCKETS = [
  100, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000,
  5000000, 10000000,
] as const;
/** Dispatches per conversation. */
export const DEFAULT_CONVERSATION_DISPATCH_BUCKETS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000, 1000000,
] as const;

/**
 * One checkpoint commit, in seconds: an in-memory store's microseconds to a remote database's
 * hundreds of milliseconds, up to the default `storeTimeoutMs` (5 s).
 */
export const DEFAULT_CHECKPOINT_DURATION_BUCKETS = [
  0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
  0.5, 1, 2.5, 5,
] as const;

/**
 * Bytes of one checkpoint write: a small whole state or one message's entry (hundreds of bytes)
 * to a long transcript's snapshot (the default `maxConversationBytes` is 256 MiB).
 */
export const DEFAULT_CHECKPOINT_SIZE_BUCKETS = [
  256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864, 268435456,
] as const;
