/**
 * The recorder: a `ConversationObserver` that writes one NDJSON line per conversation when it
 * ends (the format of `format.ts`). Per dispatch it keeps one small JSON fragment; at the end it
 * joins them into a line and hands it to the bounded sink queue. Nothing it does can throw into
 * the loop or wait for the sink.
 */

import { fail, isFunction, positiveInteger } from '../core/shared/validate.ts';
import type {
  ConversationEnd,
  ConversationObservation,
  ConversationObserver,
  ConversationStart,
  DispatchInfo,
} from '../core/spi/observer.ts';
import type { ConversationState } from '../core/spi/types.ts';
import { RECORDING_FORMAT_VERSION, type RecordedUsage } from './format.ts';
import { describeThrown, serializeBounded } from './serialize.ts';
import {
  type DroppedCounts,
  isRecordingSink,
  type RecorderLogger,
  type RecordingSink,
  SinkQueue,
} from './sink.ts';

/** What `createConversationRecorder(options)` takes: only `sink` is required. */
export interface ConversationRecorderOptions<S, C = unknown> {
  /** Where lines go: a `Writable` (it is written to, never ended) or a function taking one line. */
  readonly sink: RecordingSink;
  /**
   * What to keep of the state per dispatch, as JSON (e.g. `(state) => state.projection`): replay
   * hands it to the candidate policy as `state.projection`. Throwing, or returning what is not
   * JSON within `maxRecordChars`, costs that dispatch's `record` field (`recordError` says why).
   * @default none: dispatches are recorded without `record`
   */
  readonly record?: (state: ConversationState<S, C>) => unknown;
  /**
   * Dispatches kept per conversation; past it the line is marked `truncated` (the ending still
   * has the full `dispatchCount`).
   * @default 10000
   */
  readonly maxDispatches?: number;
  /**
   * Characters of JSON one `record(state)` may take.
   * @default 16384
   */
  readonly maxRecordChars?: number;
  /**
   * Characters of dispatches one line may take; dispatches past it are left out (`truncated`).
   * @default 4194304 (4 Mi)
   */
  readonly maxLineChars?: number;
  /**
   * Bytes waiting for the sink (queued, or written and not yet acknowledged). A conversation whose
   * line does not fit is dropped whole and counted.
   * @default 16777216 (16 MiB)
   */
  readonly maxQueuedBytes?: number;
  /**
   * Characters of dispatches held for durable conversations between two segments in this process
   * (one suspended, or handed back by an abort, until its `resume()`, `cancel()` or `recover()`
   * here): the later segment goes on from them and the conversation is written whole, as one line.
   * Past it the oldest held is let go (its later segment is then not written: `segments`).
   * @default 16777216 (16 Mi)
   */
  readonly maxHeldChars?: number;
  /**
   * Told of dropped conversations and a failed sink, at most once per `reportIntervalMs` with
   * the count held back.
   * @default a process warning of type `ConversationRecorderWarning`
   */
  readonly logger?: RecorderLogger;
  /** @default 60000 */
  readonly reportIntervalMs?: number;
}

/** What the recorder did so far. */
export interface RecorderStats {
  /** Conversations that ended while the recorder observed them. */
  readonly conversations: number;
  /** Lines the sink accepted (a `Writable`'s write callback, a function's return or resolution). */
  readonly written: number;
  /** Conversations whose line was dropped, by why. */
  readonly dropped: DroppedCounts;
  /** Lines marked `truncated`. */
  readonly truncated: number;
  /** Dispatches whose `record` field was left out (`recordError`). */
  readonly recordErrors: number;
  /**
   * Segments of durable conversations not written because no line holds the whole conversation:
   * a segment that resumed one whose earlier segments this recorder did not observe (they ran in
   * another process, or before it started), and one that suspended a conversation or ended
   * without ending it (`ConversationEnd.ended` false: an abort, a store failure) when its
   * conversation does not go on in this process (let go at `close()`, past `maxHeldChars`, or
   * taken on elsewhere). Segments that go on in this process are written as one line, not
   * counted here.
   */
  readonly segments: number;
}

export interface ConversationRecorder<S = unknown, C = unknown> extends ConversationObserver<S, C> {
  /**
   * Stops recording new conversations and resolves with the stats once every queued line is
   * acknowledged by the sink, or after `timeoutMs` (lines still queued are then dropped, counted
   * as `closed`). Does not end a `Writable` sink: it is yours.
   */
  close(options?: { readonly timeoutMs?: number }): Promise<RecorderStats>;
  /** What the recorder did so far, at once (a snapshot). */
  stats(): RecorderStats;
}

/** Senders longer than this are left out of a dispatch (replay then uses the responder's name). */
const MAX_SENDER_CHARS = 1024;

interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadInputTokens?: number;
  reasoningOutputTokens?: number;
}

const KINDS = [
  'inputTokens',
  'outputTokens',
  'cacheReadInputTokens',
  'reasoningOutputTokens',
] as const;

/** Token totals read defensively from what the core hands us (absent before anything is reported). */
function readUsage(value: unknown): Usage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  let any = false;
  const usage: Usage = { inputTokens: 0, outputTokens: 0 };
  for (const kind of KINDS) {
    const n = (value as Record<string, unknown>)[kind];
    if (typeof n === 'number' && Number.isSafeInteger(n) && n >= 0) {
      usage[kind] = n;
      if (n > 0 || kind === 'cacheReadInputTokens' || kind === 'reasoningOutputTokens') any = true;
    }
  }
  return any ? usage : undefined;
}

function sameUsage(a: Usage | undefined, b: Usage | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  for (const kind of KINDS) if (a[kind] !== b[kind]) return false;
  return true;
}

function addUsage(a: Usage | undefined, b: Usage | undefined): Usage | undefined {
  if (b === undefined) return a;
  if (a === undefined) return b;
  const sum: Usage = {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
  };
  for (const kind of ['cacheReadInputTokens', 'reasoningOutputTokens'] as const) {
    if (a[kind] !== undefined || b[kind] !== undefined) sum[kind] = (a[kind] ?? 0) + (b[kind] ?? 0);
  }
  return sum;
}

function usageJson(usage: RecordedUsage): string {
  let json = `{"inputTokens":${usage.inputTokens},"outputTokens":${usage.outputTokens}`;
  if (usage.cacheReadInputTokens !== undefined)
    json += `,"cacheReadInputTokens":${usage.cacheReadInputTokens}`;
  if (usage.reasoningOutputTokens !== undefined)
    json += `,"reasoningOutputTokens":${usage.reasoningOutputTokens}`;
  return `${json}}`;
}

function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** A property read that cannot throw (a getter, a revoked Proxy). */
function read(object: unknown, key: string): unknown {
  try {
    return (object as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

function rateLimited(logger: RecorderLogger | undefined, intervalMs: number) {
  let last = Number.NEGATIVE_INFINITY;
  let held = 0;
  return (message: string): void => {
    const now = Date.now();
    if (now - last < intervalMs) {
      held++;
      return;
    }
    const note = held > 0 ? ` (${held} more reports since the last one)` : '';
    last = now;
    held = 0;
    try {
      if (logger !== undefined) logger.warn(`${message}${note}`);
      else process.emitWarning(`${message}${note}`, 'ConversationRecorderWarning');
    } catch {
      // A logger that throws must not reach the loop either.
    }
  };
}

interface Shared<S, C> {
  readonly queue: SinkQueue;
  readonly record: ((state: ConversationState<S, C>) => unknown) | undefined;
  readonly maxDispatches: number;
  readonly maxRecordChars: number;
  readonly maxLineChars: number;
  readonly maxHeldChars: number;
  /** Conversations between two segments in this process, oldest first, and their characters. */
  readonly held: Map<string, Recording<S, C>>;
  heldChars: number;
  readonly counts: {
    conversations: number;
    truncated: number;
    recordErrors: number;
    segments: number;
  };
}

/** One conversation being recorded. */
class Recording<S, C> implements ConversationObservation<S, C> {
  readonly #shared: Shared<S, C>;
  readonly #start: ConversationStart<C>;
  readonly #responders: readonly string[];
  readonly #names: readonly string[];
  readonly #fragments: string[] = [];
  #chars = 0;
  #truncated = false;
  #usage: Usage | undefined;
  /** The last dispatch count observed (past the cap too). */
  #lastDispatch = 0;
  /** The segment this recording observes now: 1 for a run, `resumed.segment` once joined. */
  #segment = 1;

  constructor(
    shared: Shared<S, C>,
    start: ConversationStart<C>,
    names: readonly string[],
    quoted: readonly string[],
  ) {
    this.#shared = shared;
    this.#start = start;
    this.#names = names;
    this.#responders = quoted;
  }

  /** Characters held for this conversation between segments. */
  get chars(): number {
    return this.#chars;
  }

  /**
   * Goes on with the segment `start` resumes, when it continues exactly what this recording
   * observed: the next segment of the conversation (no other holder ran one in between), at a
   * committed dispatch this recording saw. Dispatches past that commit are dropped: the
   * conversation goes on from the commit, and runs them again.
   */
  continues(start: ConversationStart<C>): boolean {
    const resumed = start.resumed;
    if (
      resumed === undefined ||
      start.orchestrator !== this.#start.orchestrator ||
      resumed.segment !== this.#segment + 1 ||
      resumed.dispatchCount > this.#lastDispatch
    ) {
      return false;
    }
    const committed = resumed.dispatchCount;
    const fragments = this.#fragments;
    if (fragments.length > committed) {
      for (let i = committed; i < fragments.length; i++) {
        this.#chars -= (fragments[i] as string).length + 1;
      }
      fragments.length = committed;
      // Every dispatch up to the commit is kept: nothing left out, whatever the cap cut later.
      this.#truncated = false;
      // The totals at the commit are not known: the next dispatch writes its `usage`.
      this.#usage = undefined;
    }
    this.#lastDispatch = committed;
    this.#segment = resumed.segment;
    return true;
  }

  onDispatch(info: DispatchInfo<S, C>): void {
    this.#lastDispatch = info.dispatchCount;
    if (this.#truncated) return;
    const shared = this.#shared;
    if (this.#fragments.length >= shared.maxDispatches) {
      this.#truncated = true;
      return;
    }
    const state = info.state;
    const index = info.responderIndex;
    const responder = this.#responders[index] ?? '"?"';
    let json = `{"n":${info.dispatchCount},"elapsedMs":${info.elapsedMs},"responder":${responder}`;
    const sender = read(read(state, 'lastMessage'), 'sender');
    if (
      typeof sender === 'string' &&
      sender !== this.#names[index] &&
      sender.length <= MAX_SENDER_CHARS
    ) {
      json += `,"sender":${JSON.stringify(sender)}`;
    }
    json += `,"queueDepth":${state.queueDepth}`;
    const tokens = readUsage(read(info, 'usage'));
    if (tokens !== undefined) json += `,"tokens":${usageJson(tokens)}`;
    const expected = addUsage(this.#usage, tokens);
    const usage = readUsage(read(state, 'usage'));
    if (!sameUsage(usage, expected) && usage !== undefined) json += `,"usage":${usageJson(usage)}`;
    this.#usage = usage ?? expected;
    const observed = finite(read(info.decision, 'observed'));
    if (observed !== undefined) json += `,"observed":${observed}`;
    if (shared.record !== undefined) json += this.#record(shared, state);
    json += '}';
    if (this.#chars + json.length + 1 > shared.maxLineChars) {
      this.#truncated = true;
      return;
    }
    this.#chars += json.length + 1;
    this.#fragments.push(json);
  }

  #record(shared: Shared<S, C>, state: ConversationState<S, C>): string {
    let value: unknown;
    try {
      value = (shared.record as (state: ConversationState<S, C>) => unknown)(state);
    } catch (error) {
      shared.counts.recordErrors++;
      return `,"recordError":${JSON.stringify(`record(state) threw: ${describeThrown(error)}`)}`;
    }
    const serialized = serializeBounded(value, shared.maxRecordChars);
    if (serialized.ok) return serialized.json === undefined ? '' : `,"record":${serialized.json}`;
    shared.counts.recordErrors++;
    return `,"recordError":${JSON.stringify(`not JSON: ${serialized.reason}`)}`;
  }

  onConversationEnd(end: ConversationEnd<S, C>): void {
    const shared = this.#shared;
    if ((end.ok && end.result.suspended !== undefined) || end.ended === false) {
      // The rest runs in a resumed segment: a segment that ended without ending the conversation
      // (an abort handed it back, its store failed, another process took it) is not its ending
      // either. Held, bounded, for a later segment in this process (a person's answer, the
      // cancel() of an abandoned run, recover()), which goes on from it; let go otherwise.
      hold(shared, String(this.#start.conversationId), this);
      return;
    }
    shared.counts.conversations++;
    if (this.#truncated) shared.counts.truncated++;
    const start = this.#start;
    let line = `{"version":${RECORDING_FORMAT_VERSION},"conversationId":${JSON.stringify(String(start.conversationId))},"orchestrator":${JSON.stringify(String(start.orchestrator))},"startTimeMs":${finite(start.startTimeMs) ?? 0},"ending":`;
    let usage: Usage | undefined;
    if (end.ok) {
      const { result } = end;
      const decision = result.decision;
      line += `{"reason":${JSON.stringify(String(decision.reason))}`;
      if (typeof decision.policy === 'string')
        line += `,"policy":${JSON.stringify(decision.policy)}`;
      const observed = finite(read(decision, 'observed'));
      if (observed !== undefined) line += `,"observed":${observed}`;
      const limit = finite(read(decision, 'limit'));
      if (limit !== undefined) line += `,"limit":${limit}`;
      line += `,"dispatchCount":${result.dispatchCount},"elapsedMs":${result.elapsedMs}}`;
      usage = readUsage(read(result, 'usage'));
    } else {
      const { error } = end;
      const name = read(error, 'name');
      line += `{"reason":${JSON.stringify(String(read(error, 'reason') ?? 'error'))},"dispatchCount":${finite(read(error, 'dispatchCount')) ?? 0},"elapsedMs":${finite(read(error, 'elapsedMs')) ?? 0},"error":${JSON.stringify(typeof name === 'string' ? name.slice(0, 100) : 'Error')}}`;
      usage = readUsage(read(error, 'usage'));
    }
    if (usage !== undefined) line += `,"usage":${usageJson(usage)}`;
    if (this.#truncated) line += ',"truncated":true';
    line += `,"dispatches":[${this.#fragments.join(',')}]}\n`;
    this.#fragments.length = 0;
    shared.queue.offer(line);
  }
}

/** Holds `recording` between segments; lets go of the oldest past `maxHeldChars`. */
function hold<S, C>(shared: Shared<S, C>, id: string, recording: Recording<S, C>): void {
  letGo(shared, id);
  if (recording.chars > shared.maxHeldChars) {
    shared.counts.segments++;
    return;
  }
  shared.held.set(id, recording);
  shared.heldChars += recording.chars;
  for (const oldest of shared.held.keys()) {
    if (shared.heldChars <= shared.maxHeldChars) break;
    letGo(shared, oldest);
  }
}

/** Takes the recording held for `id` out (its segments then are not written: counted). */
function letGo<S, C>(shared: Shared<S, C>, id: string): Recording<S, C> | undefined {
  const held = shared.held.get(id);
  if (held === undefined) return undefined;
  shared.held.delete(id);
  shared.heldChars -= held.chars;
  shared.counts.segments++;
  return held;
}

function optionalPositiveInteger(option: string, value: unknown, fallback: number): number {
  return value === undefined ? fallback : positiveInteger(option, value);
}

/**
 * A recorder of conversations: pass it in `observers` and every conversation that ends becomes
 * one line on `sink`.
 * @example createConversationRecorder({ sink: createWriteStream('desks.ndjson', { flags: 'a' }), record: (s) => s.projection })
 */
export function createConversationRecorder<S = unknown, C = unknown>(
  options: ConversationRecorderOptions<S, C>,
): ConversationRecorder<S, C> {
  if (typeof options !== 'object' || options === null) {
    fail('createConversationRecorder(options)', 'an object', options);
  }
  if (!isRecordingSink(options.sink)) {
    fail(
      'createConversationRecorder({ sink })',
      'a Writable or a function taking a line',
      options.sink,
    );
  }
  if (options.record !== undefined)
    isFunction('createConversationRecorder({ record })', options.record);
  const logger = options.logger;
  if (
    logger !== undefined &&
    (typeof logger !== 'object' || logger === null || typeof logger.warn !== 'function')
  ) {
    fail('createConversationRecorder({ logger })', 'an object with a warn(message) method', logger);
  }
  const report = rateLimited(
    logger,
    optionalPositiveInteger(
      'createConversationRecorder({ reportIntervalMs })',
      options.reportIntervalMs,
      60_000,
    ),
  );
  const shared: Shared<S, C> = {
    queue: new SinkQueue(
      options.sink,
      optionalPositiveInteger(
        'createConversationRecorder({ maxQueuedBytes })',
        options.maxQueuedBytes,
        16 * 1024 * 1024,
      ),
      report,
    ),
    record: options.record,
    maxDispatches: optionalPositiveInteger(
      'createConversationRecorder({ maxDispatches })',
      options.maxDispatches,
      10_000,
    ),
    maxRecordChars: optionalPositiveInteger(
      'createConversationRecorder({ maxRecordChars })',
      options.maxRecordChars,
      16_384,
    ),
    maxLineChars: optionalPositiveInteger(
      'createConversationRecorder({ maxLineChars })',
      options.maxLineChars,
      4 * 1024 * 1024,
    ),
    maxHeldChars: optionalPositiveInteger(
      'createConversationRecorder({ maxHeldChars })',
      options.maxHeldChars,
      16 * 1024 * 1024,
    ),
    held: new Map(),
    heldChars: 0,
    counts: { conversations: 0, truncated: 0, recordErrors: 0, segments: 0 },
  };
  // Responder names are bounded by the core; quoted once per orchestrator, not per dispatch.
  const quoted = new WeakMap<readonly string[], readonly string[]>();
  const stats = (): RecorderStats => ({
    conversations: shared.counts.conversations,
    written: shared.queue.written,
    dropped: shared.queue.dropped,
    truncated: shared.counts.truncated,
    recordErrors: shared.counts.recordErrors,
    segments: shared.counts.segments,
  });
  return {
    startConversation(start: ConversationStart<C>) {
      // A resumed segment has only the dispatches since its checkpoint: replaying it from the
      // input would compare a candidate with a conversation that never ran that way. It goes on
      // from the earlier segments when they ran here (and their recording is held).
      if (start.resumed !== undefined) {
        const id = String(start.conversationId);
        const held = shared.held.get(id);
        if (held !== undefined) {
          const chars = held.chars;
          if (held.continues(start)) {
            shared.held.delete(id);
            shared.heldChars -= chars;
            return held;
          }
        }
        letGo(shared, id);
        shared.counts.segments++;
        return undefined;
      }
      let names = quoted.get(start.responders);
      if (names === undefined) {
        names = start.responders.map((name) => JSON.stringify(String(name)));
        quoted.set(start.responders, names);
      }
      return new Recording(shared, start, start.responders, names);
    },
    async close(closeOptions) {
      const timeoutMs = optionalPositiveInteger(
        'close({ timeoutMs })',
        closeOptions?.timeoutMs,
        10_000,
      );
      // Conversations between segments go on elsewhere, if at all: not written.
      for (const id of [...shared.held.keys()]) letGo(shared, id);
      await shared.queue.close(timeoutMs);
      return stats();
    },
    stats,
  };
}
