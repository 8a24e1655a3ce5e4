/** Helpers of the observability plugin: resolved settings, state attributes, bucket lists. */
import type { Attributes, DiagLogger, Tracer } from '@opentelemetry/api';
import { fail } from '../core/shared/validate.ts';
import { describeValue } from '../core/spi/errors.ts';
import type { ConversationState } from '../core/spi/types.ts';
import type { StoragePool } from './dispatch-events.ts';
import { copyAttributes, DISPATCH_EVENT_OWN_ATTRIBUTES, type FailureReports } from './guard.ts';
import type { OrchestratorMetrics } from './metrics.ts';

/** The resolved options, shared by a telemetry and its conversations. */
export interface Settings<S, C> {
  readonly tracer: Tracer;
  readonly metrics: OrchestratorMetrics | undefined;
  readonly stateAttributes: ((state: ConversationState<S, C>) => Attributes) | undefined;
  readonly captureContent: boolean;
  readonly maxContentLength: number;
  readonly maxDispatchEvents: number;
  readonly responderSpans: boolean;
  /** `gen_ai.provider.name` of a responder that declares no provider. */
  readonly defaultProviderName: string;
  readonly exemplars: boolean;
  readonly logger: DiagLogger;
  /** Where failures to read what the app hands in are reported, rate-limited per kind. */
  readonly reports: FailureReports;
  /** Kept-dispatch storage that ended conversations hand on to new ones. */
  readonly eventStorage: StoragePool;
}

/**
 * `stateAttributes(state)` as a copy taken now (at most `limit` keys: the room the event
 * attribute limit in force leaves beside the plugin's own attributes, whose names it never
 * takes), or undefined if it throws or returns no object; every failure, reading included, is
 * reported through the logger, rate-limited.
 */
export function safeAttributes<S, C>(
  settings: Settings<S, C>,
  state: ConversationState<S, C>,
  limit: number,
): Attributes | undefined {
  const compute = settings.stateAttributes;
  if (compute === undefined) return undefined;
  const report = settings.reports.stateAttributes;
  let attributes: Attributes;
  try {
    attributes = compute(state);
  } catch (error) {
    report(error);
    return undefined;
  }
  if (typeof attributes !== 'object' || attributes === null) {
    let shown: string;
    try {
      shown = describeValue(attributes);
    } catch {
      shown = typeof attributes;
    }
    report(
      new TypeError(`Expected \`stateAttributes\` to return an object of attributes, got ${shown}`),
    );
    return undefined;
  }
  return copyAttributes(
    attributes,
    limit,
    report,
    DISPATCH_EVENT_OWN_ATTRIBUTES,
    settings.reports.clash,
  );
}

/** Validated bucket bounds, or the default. */
export function bucketList(
  option: string,
  value: readonly number[] | undefined,
  fallback: readonly number[],
): readonly number[] {
  if (value === undefined) return fallback;
  if (
    !Array.isArray(value) ||
    value.length === 0 ||
    !value.every(
      (v, i) =>
        typeof v === 'number' && Number.isFinite(v) && (i === 0 || v > (value[i - 1] as number)),
    )
  ) {
    fail(option, 'a non-empty array of finite numbers in increasing order', value);
  }
  return [...value];
}
