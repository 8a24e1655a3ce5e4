/** The orchestrator's validated configuration, shared read-only by its runs. */
import type { CheckpointCodec } from '../durable/checkpoint.ts';
import type { ConversationObserver } from '../spi/observer.ts';
import type { TerminationPolicy, TurnFunction, TurnPolicy } from '../spi/policy.ts';
import type { ConversationStore, Durability } from '../spi/store.ts';
import type {
  ConversationListener,
  ConversationState,
  Projection,
  Responder,
} from '../spi/types.ts';

/** A durable orchestrator's store and how it commits (undefined without a store). */
export interface DurableConfig {
  readonly store: ConversationStore;
  readonly durability: Durability;
  readonly leaseMs: number;
  readonly storeTimeoutMs: number;
  readonly codec: CheckpointCodec;
  readonly maxCheckpointBytes: number;
}

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
  /** Set with a store (optional: configs built by hand in tests have none). */
  readonly durable?: DurableConfig | undefined;
}
