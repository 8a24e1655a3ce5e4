/**
 * A sink that writes recordings into a directory as rotating NDJSON files of bounded size: a
 * new file once the current one would pass `maxFileBytes`, the oldest deleted past `maxFiles`
 * (its own files only, found by name, so the bound holds across restarts). Lines are appended
 * one at a time; the recorder waits for each, which is its backpressure.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { type FileHandle, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fail, positiveInteger } from '../core/shared/validate.ts';

/** Options of `createRotatingFileSink()`. */
export interface RotatingFileSinkOptions {
  /** The directory (created if missing). */
  readonly dir: string;
  /**
   * Bytes per file; a line that would pass it starts the next file (a longer line gets a file of
   * its own).
   * @default 16777216 (16 MiB)
   */
  readonly maxFileBytes?: number;
  /**
   * Files kept; past it the oldest is deleted.
   * @default 8
   */
  readonly maxFiles?: number;
  /**
   * File names are `{prefix}-{UTC time}-{sequence}.ndjson`.
   * @default 'recording'
   */
  readonly prefix?: string;
}

/** Rotating NDJSON files in a directory, as a recorder's sink (`write`). */
export interface RotatingFileSink {
  /** The recorder's `sink`: appends one line; resolves once it is written. */
  readonly write: (line: string) => Promise<void>;
  /** Closes the current file. Lines written after it reopen one. */
  close(): Promise<void>;
  /** The files this sink keeps now, oldest first. */
  files(): string[];
}

const PREFIX = /^[A-Za-z0-9_.-]{1,64}$/;

function stamp(date: Date): string {
  return date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

/**
 * A rotating file sink for `createConversationRecorder`:
 * @example createConversationRecorder({ sink: createRotatingFileSink({ dir: 'recordings' }).write })
 */
export function createRotatingFileSink(options: RotatingFileSinkOptions): RotatingFileSink {
  if (typeof options !== 'object' || options === null) {
    fail('createRotatingFileSink(options)', 'an object', options);
  }
  if (typeof options.dir !== 'string' || options.dir === '') {
    fail('createRotatingFileSink({ dir })', 'a directory path', options.dir);
  }
  const maxFileBytes =
    options.maxFileBytes === undefined
      ? 16 * 1024 * 1024
      : positiveInteger('createRotatingFileSink({ maxFileBytes })', options.maxFileBytes);
  const maxFiles =
    options.maxFiles === undefined
      ? 8
      : positiveInteger('createRotatingFileSink({ maxFiles })', options.maxFiles);
  const prefix = options.prefix ?? 'recording';
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    fail(
      'createRotatingFileSink({ prefix })',
      'a file name prefix of 1-64 of [A-Za-z0-9_.-]',
      prefix,
    );
  }
  const dir = options.dir;
  mkdirSync(dir, { recursive: true });
  const ours = new RegExp(`^${prefix.replace(/\./g, '\\.')}-\\d{8}T\\d{6}Z-(\\d{6})\\.ndjson$`);
  // The files of earlier runs count against maxFiles too. The sequence goes on from theirs, so
  // a run never reopens a file of an earlier one (a crashed run's may end in a partial line),
  // even restarted within the same second or with the clock set back; they sort by it.
  const seqOf = (f: string): number => Number(ours.exec(f)?.[1]);
  const earlier = readdirSync(dir)
    .filter((f) => ours.test(f))
    .sort((a, b) => seqOf(a) - seqOf(b) || (a < b ? -1 : a > b ? 1 : 0));
  const files = earlier.map((f) => join(dir, f));
  let sequence = earlier.reduce((max, f) => Math.max(max, seqOf(f)), 0);
  let handle: FileHandle | undefined;
  let size = 0;
  let chain: Promise<void> = Promise.resolve();

  async function rotate(): Promise<void> {
    await handle?.close();
    handle = undefined;
    let path: string;
    for (;;) {
      path = join(
        dir,
        `${prefix}-${stamp(new Date())}-${String(++sequence % 1_000_000).padStart(6, '0')}.ndjson`,
      );
      try {
        // A new file only ('wx'): never appended to a file someone else wrote.
        handle = await open(path, 'wx');
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
    }
    size = 0;
    files.push(path);
    while (files.length > maxFiles) await rm(files.shift() as string, { force: true });
  }

  async function append(line: string): Promise<void> {
    const bytes = Buffer.byteLength(line);
    if (handle === undefined || (size > 0 && size + bytes > maxFileBytes)) await rotate();
    // appendFile writes the whole line (it loops over short writes).
    await (handle as FileHandle).appendFile(line);
    size += bytes;
  }

  return {
    write: (line) => {
      const next = chain.then(() => append(line));
      chain = next.catch(() => {});
      return next;
    },
    close: () => {
      const next = chain.then(async () => {
        await handle?.close();
        handle = undefined;
      });
      chain = next.catch(() => {});
      return next;
    },
    files: () => [...files],
  };
}
