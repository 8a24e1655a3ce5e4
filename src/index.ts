export { type AiSdkUsage, usageFromAiSdk } from './core/ai-sdk-usage.ts';
export type { ResponderFailurePolicy } from './core/config.ts';
export {
  ConversationAbortedError,
  ConversationError,
  DispatchDeadlineError,
  OrchestratorConfigError,
  PolicyError,
  QueueOverflowError,
  ResponderError,
} from './core/errors.ts';
export { composeListeners } from './core/listeners.ts';
export type {
  ConversationEnd,
  ConversationObservation,
  ConversationObserver,
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
  ConversationListener,
  ConversationResult,
  ConversationState,
  ConversationUsage,
  EndReason,
  Message,
  Projection,
  Responder,
  ResponderContext,
  ResponderOutput,
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
