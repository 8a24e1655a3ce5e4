/**
 * The bounded queue between the recorder and its sink. The loop only ever appends a whole line
 * to the queue (or drops it): it never waits for the sink. A sink that is slow, never drains,
 * fails (a full disk) or throws costs whole conversations, counted, never a half line from us.
 */
import type { Writable } from 'node:stream';
import { describeThrown } from './serialize.ts';

/** Where recordings go: a Node `Writable` (a file stream, stdout), or a function taking one line. */
export type RecordingSink =
  | Pick<Writable, 'write' | 'once' | 'on'>
  | ((line: string) => unknown | Promise<unknown>);

/** Whole conversations not written, by why. */
export interface DroppedCounts {
  /** The queue to the sink was full (a slow or stuck sink). */
  readonly queueFull: number;
  /** The sink failed: a `Writable` emitted `error` (it stays failed), or the function threw or rejected. */
  readonly sinkFailed: number;
  /** Ended after `close()` was called, or still queued when `close()` timed out. */
  readonly closed: number;
}

/** A diagnostics logger, as the recorder reports drops (rate-limited) through it. */
export interface RecorderLogger {
  /** Receives one line of text; a logger that throws is ignored. */
  warn(message: string): void;
}

interface WritableLike {
  write(chunk: string, callback: (error?: Error | null) => void): boolean;
  once(event: 'drain', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

function isWritable(sink: unknown): sink is WritableLike {
  return (
    typeof sink === 'object' &&
    sink !== null &&
    typeof (sink as WritableLike).write === 'function' &&
    typeof (sink as WritableLike).once === 'function' &&
    typeof (sink as WritableLike).on === 'function'
  );
}

/** Whether a value can be a sink (for the recorder's option check). */
export function isRecordingSink(sink: unknown): sink is RecordingSink {
  return typeof sink === 'function' || isWritable(sink);
}

type Drop = keyof DroppedCounts;

export class SinkQueue {
  readonly #writable: WritableLike | undefined;
  readonly #fn: ((line: string) => unknown) | undefined;
  readonly #maxQueuedBytes: number;
  readonly #report: (message: string) => void;
  readonly #queue: string[] = [];
  #head = 0;
  /** Bytes queued plus bytes handed to the sink and not yet acknowledged. */
  #pendingBytes = 0;
  #inFlight = 0;
  #waitingForDrain = false;
  #failed = false;
  #closed = false;
  #written = 0;
  /** Lines in flight when close() timed out: already counted as dropped if they settle later. */
  #abandoned = 0;
  readonly #dropped: Record<Drop, number> = { queueFull: 0, sinkFailed: 0, closed: 0 };
  #idle: (() => void)[] = [];

  constructor(sink: RecordingSink, maxQueuedBytes: number, report: (message: string) => void) {
    this.#maxQueuedBytes = maxQueuedBytes;
    this.#report = report;
    if (isWritable(sink)) {
      this.#writable = sink;
      // Without a listener an `error` event would throw from the stream and end the process.
      sink.on('error', (error) => this.#sinkFailed(error));
    } else this.#fn = sink as (line: string) => unknown;
  }

  get written(): number {
    return this.#written;
  }

  get dropped(): DroppedCounts {
    return { ...this.#dropped };
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Queues one whole line (with its newline) or drops it; never blocks, never throws. */
  offer(line: string): boolean {
    if (this.#closed) return this.#drop('closed', 1, 'the recorder is closed');
    if (this.#failed && this.#writable !== undefined) {
      return this.#drop('sinkFailed', 1, 'the sink failed earlier');
    }
    const bytes = Buffer.byteLength(line);
    if (this.#pendingBytes + bytes > this.#maxQueuedBytes) {
      return this.#drop(
        'queueFull',
        1,
        `the queue to the sink is full (${this.#pendingBytes} bytes waiting, at most ${this.#maxQueuedBytes})`,
      );
    }
    this.#pendingBytes += bytes;
    this.#queue.push(line);
    this.#pump();
    return true;
  }

  /** Stops taking lines; resolves once every queued line is acknowledged, or after `timeoutMs`. */
  close(timeoutMs: number): Promise<void> {
    this.#closed = true;
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        // Lines handed to the sink and never acknowledged count as lost too.
        const left = this.#queue.length - this.#head + this.#inFlight;
        this.#abandoned = this.#inFlight;
        this.#queue.length = 0;
        this.#head = 0;
        if (left > 0) this.#drop('closed', left, `close() timed out after ${timeoutMs} ms`);
        resolve();
      }, timeoutMs);
      // Not unref'd: a caller awaiting close() must see it settle. An unref'd timer let a process
      // whose only pending work was this close exit with an unsettled await (code 13) instead.
      this.#idle.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  #isIdle(): boolean {
    return this.#head === this.#queue.length && this.#inFlight === 0;
  }

  #drop(why: Drop, count: number, detail: string): false {
    this.#dropped[why] += count;
    this.#report(
      `ConversationRecorder dropped ${count} conversation${count === 1 ? '' : 's'}: ${detail}`,
    );
    return false;
  }

  #pump(): void {
    while (this.#head < this.#queue.length && !this.#waitingForDrain) {
      if (this.#fn !== undefined && this.#inFlight > 0) return;
      if (this.#failed && this.#writable !== undefined) {
        this.#dropRest('the sink failed');
        return;
      }
      const line = this.#queue[this.#head] as string;
      this.#queue[this.#head++] = '';
      if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
        this.#queue.splice(0, this.#head);
        this.#head = 0;
      }
      if (this.#writable !== undefined) this.#write(this.#writable, line);
      else this.#call(this.#fn as (line: string) => unknown, line);
    }
    this.#checkIdle();
  }

  #write(writable: WritableLike, line: string): void {
    const bytes = Buffer.byteLength(line);
    this.#inFlight++;
    let ok: boolean;
    try {
      ok = writable.write(line, (error) => {
        this.#inFlight--;
        this.#pendingBytes -= bytes;
        if (this.#abandoned > 0) this.#abandoned--;
        else if (error) this.#sinkFailed(error, 1);
        else this.#written++;
        this.#checkIdle();
      });
    } catch (error) {
      this.#inFlight--;
      this.#pendingBytes -= bytes;
      this.#sinkFailed(error, 1);
      return;
    }
    if (!ok) {
      this.#waitingForDrain = true;
      writable.once('drain', () => {
        this.#waitingForDrain = false;
        this.#pump();
      });
    }
  }

  #call(fn: (line: string) => unknown, line: string): void {
    const bytes = Buffer.byteLength(line);
    let returned: unknown;
    try {
      returned = fn(line);
    } catch (error) {
      this.#pendingBytes -= bytes;
      this.#drop('sinkFailed', 1, `the sink threw: ${describeThrown(error)}`);
      return;
    }
    if (
      (typeof returned === 'object' || typeof returned === 'function') &&
      returned !== null &&
      typeof (returned as PromiseLike<unknown>).then === 'function'
    ) {
      // One line at a time to a function that returns a promise: that is its backpressure.
      this.#inFlight++;
      Promise.resolve(returned).then(
        () => this.#settled(bytes, undefined),
        (error: unknown) => this.#settled(bytes, error ?? new Error('rejected')),
      );
      return;
    }
    this.#pendingBytes -= bytes;
    this.#written++;
  }

  #settled(bytes: number, error: unknown): void {
    this.#inFlight--;
    this.#pendingBytes -= bytes;
    if (this.#abandoned > 0) this.#abandoned--;
    else if (error === undefined) this.#written++;
    else this.#drop('sinkFailed', 1, `the sink rejected: ${describeThrown(error)}`);
    this.#pump();
  }

  /** A `Writable` failed: it will take nothing more (a stream that emitted `error` is destroyed). */
  #sinkFailed(error: unknown, lost = 0): void {
    const first = !this.#failed;
    this.#failed = true;
    const detail = `the sink failed: ${describeThrown(error)}; every later conversation is dropped`;
    if (lost > 0) this.#drop('sinkFailed', lost, detail);
    else if (first) this.#report(`ConversationRecorder: ${detail}`);
    this.#waitingForDrain = false;
    this.#dropRest('the sink failed');
  }

  #dropRest(detail: string): void {
    const left = this.#queue.length - this.#head;
    if (left > 0) {
      for (let i = this.#head; i < this.#queue.length; i++) {
        this.#pendingBytes -= Buffer.byteLength(this.#queue[i] as string);
      }
      this.#queue.length = 0;
      this.#head = 0;
      this.#drop('sinkFailed', left, detail);
    }
    this.#checkIdle();
  }

  #checkIdle(): void {
    if (!this.#isIdle() || this.#idle.length === 0) return;
    const waiting = this.#idle;
    this.#idle = [];
    for (const resolve of waiting) resolve();
  }
}
