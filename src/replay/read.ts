/**
 * Reading recordings: NDJSON files (streamed line by line, so a file of any size is read in
 * bounded memory), arrays and (async) iterables of lines or parsed objects. Every line is checked
 * against the format before replay sees it; a bad one is an error naming its file and line, or
 * is counted and skipped (`skipBad`).
 */

import { createReadStream } from 'node:fs';
import { isFunction, positiveInteger } from '../core/shared/validate.ts';
import { OrchestratorError } from '../core/spi/errors.ts';
import type { RecordedConversation } from './format.ts';
import { lineRuleProblem } from './line-rules.ts';
import { recordingSchemaCheck } from './schema.ts';

/** A line of a recording that is not a recorded conversation: where, and why. */
export class RecordingFormatError extends OrchestratorError {
  /** The class's name. */
  override name = 'RecordingFormatError';
  override readonly code: string = 'ERR_RECORDING_FORMAT';
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
  /**
   * Bytes (UTF-8) one line may take. A longer line is a `RecordingFormatError` (skippable): a file
   * is read in chunks and a line past the limit is counted through, never held, so memory stays
   * bounded by this limit whatever the file holds. The default holds every line the recorder
   * writes with its default `maxLineChars` (4 Mi characters, at most 3 bytes each).
   * @default 16777216 (16 MiB)
   */
  readonly maxLineBytes?: number;
}

/** `ReadOptions.maxLineBytes`'s default: 16 MiB. */
export const DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024;

/** Whether an NDJSON line is blank (nothing, or only white space): blank lines are not recordings and are passed over in every input form. */
const isBlank = (text: string): boolean => /^[ \t\r\n]*$/.test(text);

/**
 * Why `value` is not a recorded conversation of this format, or undefined when it is one: first
 * the JSON Schema (`schemas/recording.schema.json`, interpreted as it is), then what a schema
 * cannot say, the rules across fields of line-rules.ts (which the schema's description states).
 */
export function recordingProblem(value: unknown): string | undefined {
  return recordingSchemaCheck()(value, '') ?? lineRuleProblem(value as RecordedConversation);
}

function describeParseError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

class Reader {
  readonly #options: ReadOptions;
  readonly maxLineBytes: number;
  skipped = 0;
  constructor(options: ReadOptions) {
    this.#options = options;
    this.maxLineBytes =
      options.maxLineBytes === undefined
        ? DEFAULT_MAX_LINE_BYTES
        : positiveInteger('readRecordings({ maxLineBytes })', options.maxLineBytes);
    if (options.onBadLine !== undefined)
      isFunction('readRecordings({ onBadLine })', options.onBadLine);
  }

  /** The line as a recording, or undefined when it was skipped or blank. Throws when it may not skip. */
  take(value: unknown, file: string, line: number): RecordedConversation | undefined {
    let parsed = value;
    if (typeof value === 'string') {
      if (isBlank(value)) return undefined;
      if (value.length > this.maxLineBytes / 3 && Buffer.byteLength(value) > this.maxLineBytes)
        return this.tooLong(file, line);
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

  /** A line past `maxLineBytes`. */
  tooLong(file: string, line: number): undefined {
    return this.#bad(
      file,
      line,
      `longer than ${this.maxLineBytes} bytes (maxLineBytes; the recorder writes lines of at most its maxLineChars)`,
    );
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

const NEWLINE = 0x0a;
const CHUNK_BYTES = 64 * 1024;

/**
 * The lines of a file, read in chunks of bytes: a line is decoded only once it is whole and
 * within `maxLineBytes`; a longer one is counted through to its newline and reported, so no
 * line, however long, is ever held past the limit (readline would build it as one string, and a
 * line past V8's largest string ends the process).
 */
async function* readFile(reader: Reader, file: string): AsyncGenerator<RecordedConversation> {
  const limit = reader.maxLineBytes;
  // Open errors (ENOENT) surface here, as a rejection of the first chunk, with the path.
  const stream = createReadStream(file, { highWaterMark: CHUNK_BYTES });
  let parts: Buffer[] = [];
  let length = 0;
  let tooLong = false;
  let line = 0;
  const finish = (): RecordedConversation | undefined => {
    line++;
    if (tooLong) {
      tooLong = false;
      return reader.tooLong(file, line);
    }
    const text = (
      parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, length)
    ).toString('utf8');
    parts = [];
    length = 0;
    return reader.take(text.endsWith('\r') ? text.slice(0, -1) : text, file, line);
  };
  const add = (piece: Buffer): void => {
    if (tooLong) return;
    // A CR before the newline is not part of the line: one byte of slack for it.
    if (length + piece.length > limit + 1) {
      tooLong = true;
      parts = [];
      length = 0;
      return;
    }
    parts.push(piece);
    length += piece.length;
  };
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      let from = 0;
      for (;;) {
        const at = chunk.indexOf(NEWLINE, from);
        if (at === -1) break;
        add(chunk.subarray(from, at));
        const recording = finish();
        if (recording !== undefined) yield recording;
        from = at + 1;
      }
      // Copied: the stream may reuse its buffers.
      if (from < chunk.length) add(Buffer.from(chunk.subarray(from)));
    }
    if (length > 0 || tooLong) {
      const recording = finish();
      if (recording !== undefined) yield recording;
    }
  } finally {
    stream.destroy();
  }
}
