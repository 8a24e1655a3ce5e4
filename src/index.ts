export {
  type CheckpointCodec,
  jsonCodec,
  type Suspend,
  suspend,
  UnstorableValueError,
} from './core/durable/checkpoint.ts';
export type { CheckpointOptions } from './core/durable/config.ts';
export {
  isLeaseOwnerAlive,
  type LeaseOwnerParts,
  newLeaseOwner,
  parseLeaseOwner,
} from './core/durable/lease-owner.ts';
export { type AiSdkUsage, usageFromAiSdk } from './core/loop/ai-sdk-usage.ts';
export type { ResponderFailurePolicy } from './core/loop/config.ts';
export { composeListeners } from './core/loop/listeners.ts';
export { ConversationOrchestrator, type OrchestratorOptions } from './core/orchestrator.ts';
export {
  CheckpointError,
  ConversationAbortedError,
  ConversationError,
  ConversationExistsError,
  ConversationLeaseError,
  ConversationNotFoundError,
  DispatchDeadlineError,
  OrchestratorConfigError,
  OrchestratorError,
  PolicyError,
  QueueOverflowError,
  ResponderError,
} from './core/spi/errors.ts';
export type {
  CheckpointWrite,
  ConversationEnd,
  ConversationObservation,
  ConversationObserver,
  ConversationResume,
  ConversationStart,
  DispatchInfo,
  ResponderFailure,
} from './core/spi/observer.ts';
export {
  CONTINUE,
  type TerminationCheck,
  type TerminationPolicy,
  type TurnContext,
  type TurnFunction,
  type TurnPolicy,
  type TurnSelection,
} from './core/spi/policy.ts';
export type {
  AcquireOutcome,
  Checkpoint,
  CheckpointEntry,
  CommitOutcome,
  ConversationStatus,
  ConversationStore,
  CreateOutcome,
  Durability,
  IncrementalStore,
  Lease,
  ListQuery,
  SnapshotOutcome,
  StoredConversation,
  StoreStats,
} from './core/spi/store.ts';
export type {
  CancelOptions,
  ConversationListener,
  ConversationResult,
  ConversationState,
  ConversationSuspension,
  ConversationUsage,
  EndReason,
  Message,
  Projection,
  RecoverOptions,
  RecoverResult,
  Responder,
  ResponderContext,
  ResponderOutput,
  ResumeOptions,
  RunOptions,
  TerminationDecision,
  Usage,
  UsageTotals,
} from './core/spi/types.ts';
export {
  allOf,
  anyOf,
  type ConvergedOptions,
  converged,
  maxDispatches,
  stopWhen,
  type TokenBudgetOptions,
  timeout,
  tokenBudget,
} from './policies/termination.ts';
export { type AddressedOptions, addressed, broadcast, roundRobin } from './policies/turn.ts';
export {
  createMemoryStore,
  type MemoryStore,
  type MemoryStoreOptions,
} from './stores/memory/store.ts';
