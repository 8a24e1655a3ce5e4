/**
 * Reading recordings: NDJSON files (streamed line by line, so a file of any size is read in
 * bounded memory), arrays and (async) iterables of lines or parsed objects. Every line is checked
 * against the format before replay sees it; a bad one is an error naming its file and line, or
 * is counted and skipped (`skipBad`).
 */
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { RECORDING_FORMAT_VERSION, type RecordedConversation } from './format.ts';

/** A line of a recording that is not a recorded conversation: where, and why. */
export class RecordingFormatError extends Error {
  /** The class's name. */
  override name = 'RecordingFormatError';
  /** The file, or `<input>` for an array or iterable. */
  readonly file: string;
  /** 1-based line number (or position in an array or iterable). */
  readonly line: number;
  constructor(file: string, line: number, reason: string) {
    super(`${file}:${line}: ${reason}`);
    this.file = file;
    this.line = line;
  }
}

/** What a replay reads: a path, or recorded conversations (parsed, or as NDJSON lines). */
export type RecordingSource =
  | string
  | Iterable<RecordedConversation | string>
  | AsyncIterable<RecordedConversation | string>;

/** How recordings are read: strictly, or skipping (and counting) the lines that are not recordings. */
export interface ReadOptions {
  /**
   * Count and skip lines that are not recorded conversations instead of failing.
   * @default false
   */
  readonly skipBad?: boolean;
  /** Told of every skipped line. */
  readonly onBadLine?: (error: RecordingFormatError) => void;
}

const isCount = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function checkUsage(value: unknown, where: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) return `${where} is not an object`;
  const u = value as Record<string, unknown>;
  if (!isCount(u.inputTokens) || !isCount(u.outputTokens))
    return `${where} needs inputTokens and outputTokens as non-negative integers`;
  for (const k of ['cacheReadInputTokens', 'reasoningOutputTokens']) {
    if (u[k] !== undefined && !isCount(u[k])) return `${where}.${k} is not a non-negative integer`;
  }
  return undefined;
}

/** Why `value` is not a recorded conversation of this format, or undefined when it is one. */
export function recordingProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return 'not a JSON object';
  const r = value as Record<string, unknown>;
  if (r.version !== RECORDING_FORMAT_VERSION)
    return `version is ${JSON.stringify(r.version)}, expected ${RECORDING_FORMAT_VERSION}`;
  if (typeof r.conversationId !== 'string') return 'conversationId is not a string';
  if (typeof r.orchestrator !== 'string') return 'orchestrator is not a string';
  if (!isNumber(r.startTimeMs)) return 'startTimeMs is not a number';
  const e = r.ending as Record<string, unknown> | undefined;
  if (typeof e !== 'object' || e === null) return 'ending is not an object';
  if (typeof e.reason !== 'string') return 'ending.reason is not a string';
  if (!isCount(e.dispatchCount)) return 'ending.dispatchCount is not a non-negative integer';
  if (!isNumber(e.elapsedMs)) return 'ending.elapsedMs is not a number';
  if (e.policy !== undefined && typeof e.policy !== 'string')
    return 'ending.policy is not a string';
  if (e.observed !== undefined && !isNumber(e.observed)) return 'ending.observed is not a number';
  if (e.limit !== undefined && !isNumber(e.limit)) return 'ending.limit is not a number';
  const usage = checkUsage(r.usage, 'usage');
  if (usage !== undefined) return usage;
  if (r.truncated !== undefined && r.truncated !== true) return 'truncated is not true';
  const dispatches = r.dispatches;
  if (!Array.isArray(dispatches)) return 'dispatches is not an array';
  if (dispatches.length > e.dispatchCount)
    return `${dispatches.length} dispatches recorded but ending.dispatchCount is ${e.dispatchCount}`;
  if (r.truncated === undefined && dispatches.length !== e.dispatchCount)
    return `${dispatches.length} dispatches recorded, ending.dispatchCount is ${e.dispatchCount} and the line is not truncated`;
  for (let i = 0; i < dispatches.length; i++) {
    const d = dispatches[i] as Record<string, unknown>;
    const at = `dispatches[${i}]`;
    if (typeof d !== 'object' || d === null) return `${at} is not an object`;
    if (d.n !== i + 1) return `${at}.n is ${JSON.stringify(d.n)}, expected ${i + 1}`;
    if (!isNumber(d.elapsedMs)) return `${at}.elapsedMs is not a number`;
    if (typeof d.responder !== 'string') return `${at}.responder is not a string`;
    if (d.sender !== undefined && typeof d.sender !== 'string')
      return `${at}.sender is not a string`;
    if (!isCount(d.queueDepth)) return `${at}.queueDepth is not a non-negative integer`;
    if (d.observed !== undefined && !isNumber(d.observed)) return `${at}.observed is not a number`;
    const problem = checkUsage(d.tokens, `${at}.tokens`) ?? checkUsage(d.usage, `${at}.usage`);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function describeParseError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

class Reader {
  readonly #options: ReadOptions;
  skipped = 0;
  constructor(options: ReadOptions) {
    this.#options = options;
  }

  /** The line as a recording, or undefined when it was skipped. Throws when it may not skip. */
  take(value: unknown, file: string, line: number): RecordedConversation | undefined {
    let parsed = value;
    if (typeof value === 'string') {
      try {
        parsed = JSON.parse(value);
      } catch (error) {
        return this.#bad(
          file,
          line,
          `not JSON (${describeParseError(error)}; a line cut short, as a full disk leaves one?)`,
        );
      }
    }
    const problem = recordingProblem(parsed);
    if (problem !== undefined)
      return this.#bad(file, line, `not a recorded conversation: ${problem}`);
    return parsed as RecordedConversation;
  }

  #bad(file: string, line: number, reason: string): undefined {
    const error = new RecordingFormatError(file, line, reason);
    if (!this.#options.skipBad) throw error;
    this.skipped++;
    this.#options.onBadLine?.(error);
    return undefined;
  }
}

/** Recordings read from files or an iterable, with the count of bad lines skipped so far. */
export interface RecordingStream extends AsyncIterable<RecordedConversation> {
  /** Lines skipped so far (with `skipBad`). */
  readonly skipped: number;
}

/**
 * Reads recorded conversations from NDJSON files, in order, line by line (bounded memory), or
 * checks those of an (async) iterable of parsed objects or NDJSON lines. A line that is not a
 * recorded conversation throws a `RecordingFormatError` naming its file and line, or is counted
 * and skipped with `skipBad`.
 */
export function readRecordings(
  source: RecordingSource,
  options: ReadOptions = {},
): RecordingStream {
  const reader = new Reader(options);
  async function* generate(): AsyncGenerator<RecordedConversation> {
    if (typeof source === 'string') {
      yield* readFile(reader, source);
      return;
    }
    let position = 0;
    for await (const item of source as AsyncIterable<unknown>) {
      position++;
      const recording = reader.take(item, '<input>', position);
      if (recording !== undefined) yield recording;
    }
  }
  return {
    [Symbol.asyncIterator]: () => generate(),
    get skipped() {
      return reader.skipped;
    },
  };
}

/** Every file's recordings, one file after the other. */
export function readRecordingFiles(
  files: readonly string[],
  options: ReadOptions = {},
): RecordingStream {
  const reader = new Reader(options);
  async function* generate(): AsyncGenerator<RecordedConversation> {
    for (const file of files) yield* readFile(reader, file);
  }
  return {
    [Symbol.asyncIterator]: () => generate(),
    get skipped() {
      return reader.skipped;
    },
  };
}

async function* readFile(reader: Reader, file: string): AsyncGenerator<RecordedConversation> {
  const stream = createReadStream(file, { encoding: 'utf8' });
  // Open errors (ENOENT) surface here, as a rejection of the first line, with the path.
  const lines = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
  let line = 0;
  try {
    for await (const text of lines) {
      line++;
      if (text.trim() === '') continue;
      const recording = reader.take(text, file, line);
      if (recording !== undefined) yield recording;
    }
  } finally {
    lines.close();
    stream.destroy();
  }
}
