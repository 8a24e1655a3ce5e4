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
export {
  ConversationOrchestrator,
  type OrchestratorOptions,
  type ResponderFailurePolicy,
} from './core/orchestrator.ts';
export type {
  ConversationListener,
  ConversationResult,
  ConversationState,
  EndReason,
  Message,
  Projection,
  Responder,
  ResponderContext,
  ResponderOutput,
  RunOptions,
  TerminationDecision,
} from './core/types.ts';
export {
  allOf,
  anyOf,
  CONTINUE,
  type ConvergedOptions,
  converged,
  maxDispatches,
  stopWhen,
  type TerminationCheck,
  type TerminationPolicy,
  timeout,
} from './policies/termination.ts';
export {
  type AddressedOptions,
  addressed,
  broadcast,
  roundRobin,
  type TurnFunction,
  type TurnPolicy,
  type TurnSelection,
} from './policies/turn.ts';
