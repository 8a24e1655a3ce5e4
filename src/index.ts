export { type AiSdkUsage, usageFromAiSdk } from './core/ai-sdk-usage.ts';
export {
  type CheckpointCodec,
  jsonCodec,
  type Suspend,
  suspend,
  UnstorableValueError,
} from './core/checkpoint.ts';
export type { ResponderFailurePolicy } from './core/config.ts';
export {
  CheckpointError,
  ConversationAbortedError,
  ConversationError,
  ConversationExistsError,
  ConversationLeaseError,
  ConversationNotFoundError,
  DispatchDeadlineError,
  OrchestratorConfigError,
  PolicyError,
  QueueOverflowError,
  ResponderError,
} from './core/errors.ts';
export {
  isLeaseOwnerAlive,
  type LeaseOwnerParts,
  newLeaseOwner,
  parseLeaseOwner,
} from './core/lease-owner.ts';
export { composeListeners } from './core/listeners.ts';
export {
  createMemoryStore,
  type MemoryStore,
  type MemoryStoreOptions,
} from './core/memory-store.ts';
export type {
  ConversationEnd,
  ConversationObservation,
  ConversationObserver,
  ConversationResume,
  ConversationStart,
  DispatchInfo,
  ResponderFailure,
} from './core/observer.ts';
export { ConversationOrchestrator, type OrchestratorOptions } from './core/orchestrator.ts';
export {
  CONTINUE,
  type TerminationCheck,
  type TerminationPolicy,
  type TurnContext,
  type TurnFunction,
  type TurnPolicy,
  type TurnSelection,
} from './core/policy.ts';
export type {
  AcquireOutcome,
  Checkpoint,
  CommitOutcome,
  ConversationStatus,
  ConversationStore,
  CreateOutcome,
  Durability,
  Lease,
  ListQuery,
  StoredConversation,
  StoreStats,
} from './core/store.ts';
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
} from './core/types.ts';
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
