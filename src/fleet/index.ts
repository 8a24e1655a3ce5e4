export { type FleetConnection, RedisUnreachableError } from './connection.ts';
export { UnknownOrchestratorError } from './errors.ts';
export { ForeignPayloadError, PAYLOAD_FORMAT, type SegmentPayload } from './payload.ts';
export {
  type ConversationQueue,
  type ConversationQueueOptions,
  createConversationQueue,
  type FleetResumeOptions,
  type ResumeOptions,
  type ResumeOutcome,
  type StartOptions,
} from './queue.ts';
export type { FleetOrchestrator, FleetRunOptions, SegmentOutcome } from './segment.ts';
export { runSegment, type SegmentContext } from './segment.ts';
export { createConversationWorker } from './worker.ts';
export type {
  CloseOptions,
  ConversationWorker,
  ConversationWorkerOptions,
  ConversationWorkerStats,
  FleetEvent,
  SegmentRateLimit,
} from './worker-options.ts';
