/** The orchestrator's validated configuration, shared read-only by its runs. */
import type { ConversationObserver } from '../spi/observer.ts';
import type { TerminationPolicy, TurnFunction, TurnPolicy } from '../spi/policy.ts';
import type {
  ConversationListener,
  ConversationState,
  Projection,
  Responder,
} from '../spi/types.ts';
import type { DurabilityOpener } from './durability.ts';

/** What to do when a responder throws or rejects. */
export type ResponderFailurePolicy<S, C = unknown> =
  | 'stop'
  | 'skip'
  | ((error: unknown, responder: string, state: ConversationState<S, C>) => 'stop' | 'skip');

export interface RunConfig<S, C> {
  readonly name: string;
  readonly responders: readonly Responder<S, C>[];
  readonly responderNames: readonly string[];
  readonly providers: readonly (string | undefined)[];
  readonly responderIndex: ReadonlyMap<Responder<S, C> | string, number>;
  readonly turnPolicy: TurnPolicy<S, C> | TurnFunction<S, C>;
  readonly projection: Projection<S, C>;
  readonly termination: TerminationPolicy<S, C>;
  readonly listener: ConversationListener<S, C> | undefined;
  readonly observers: readonly ConversationObserver<S, C>[];
  readonly dispatchTimeoutMs: number | undefined;
  readonly maxQueueLength: number;
  readonly historySize: number;
  readonly onResponderError: ResponderFailurePolicy<S, C>;
  readonly onListenerError: (error: unknown) => void;
  readonly yieldIntervalMs: number;
  /** Set with a store: how a run opens its store session (optional: hand-built configs have none). */
  readonly durable?: DurabilityOpener<S, C> | undefined;
}
