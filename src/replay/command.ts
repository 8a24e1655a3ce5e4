/**
 * `conversation-orchestrator replay <recording.ndjson…> --policy ./candidate.ts[#export]`: replays
 * recordings against a candidate policy and prints the summary. Mistakes in what it was given (a
 * missing file, a malformed line, a missing export, an export that is not a policy) print one
 * clear line and exit 2; anything else unexpected exits 1.
 */
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { parsePolicySpec, UsageError } from './load-policy.ts';
import { RecordingFormatError } from './read.ts';
import type { ReplayReport } from './replay.ts';
import { formatReport, printable, renderHtml } from './report.ts';
import { describeThrown } from './serialize.ts';
import {
  ID_BYTES,
  SLOT_DECIDING,
  SLOT_DISPATCH,
  SLOT_GENERATION,
  SLOT_ID_LENGTH,
  SLOT_ORDINAL,
  SLOTS,
  WORKER_MARK,
  type WorkerInput,
  type WorkerMessage,
} from './worker-protocol.ts';

export const USAGE = `usage: conversation-orchestrator replay <recording.ndjson…> --policy <file>[#export] [options]

Replays recorded conversations against a candidate termination policy (no model is called) and
prints what it would have changed.

  --policy <file>[#export]  the module exporting the candidate (default: its default export, or
                            its only exported termination policy); .js/.mjs, or .ts with tsx
                            installed in your project or a Node that strips types
  --json <out.json>         also write the report as JSON
  --html <out.html>         also write a self-contained HTML page (chart and risk list)
  --skip-bad                count and skip lines that are not recorded conversations
  --decision-timeout-ms <ms>
                            the longest one decision of the candidate (its start() or one
                            check) may take (default 5000); past it the command stops it and
                            exits 2 naming the conversation and dispatch
  --load-timeout-ms <ms>    the longest loading the candidate's module may take (default
                            30000); past it the command exits 2 naming the module and export
  --max-line-bytes <n>      the longest line read (default 16777216, 16 MiB); a longer line
                            is a bad line (an error, or skipped with --skip-bad)
  -h, --help                this text
`;

/** Where the command writes. */
export interface CommandIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly cwd: string;
}

const MAX_SKIPPED_SHOWN = 10;
/** `--decision-timeout-ms`'s default: a termination check takes microseconds. */
export const DEFAULT_DECISION_TIMEOUT_MS = 5_000;
/** `--load-timeout-ms`'s default: room for compiling a TypeScript candidate on a slow machine. */
export const DEFAULT_LOAD_TIMEOUT_MS = 30_000;

/** A message of several lines (one with the usage text) with each line made `printable()`. */
function printableLines(text: string): string {
  return text.split('\n').map(printable).join('\n');
}

/** Runs the command line `args` (without `node` and the script); resolves with the exit code. */
export async function runCommand(args: readonly string[], io: CommandIo): Promise<number> {
  try {
    return await run(args, io);
  } catch (error) {
    if (error instanceof UsageError || error instanceof RecordingFormatError) {
      io.stderr(`conversation-orchestrator: ${printableLines(error.message)}\n`);
      return 2;
    }
    io.stderr(
      `conversation-orchestrator: unexpected failure: ${printable(describeThrown(error))}\n`,
    );
    return 1;
  }
}

async function run(args: readonly string[], io: CommandIo): Promise<number> {
  const [command, ...rest] = args;
  if (command === '-h' || command === '--help' || command === 'help') {
    io.stdout(USAGE);
    return 0;
  }
  if (command !== 'replay') {
    throw new UsageError(
      `${command === undefined ? 'no command given' : `unknown command \`${command}\``}\n${USAGE}`,
    );
  }
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(rest);
  } catch (error) {
    throw new UsageError(`${describeThrown(error).replace(/^TypeError[^:]*: /, '')}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.stdout(USAGE);
    return 0;
  }
  if (values.policy === undefined) throw new UsageError(`--policy is required\n${USAGE}`);
  if (positionals.length === 0) throw new UsageError(`no recording given\n${USAGE}`);
  const files = positionals.map((f) => resolve(io.cwd, f));
  for (const [i, file] of files.entries()) {
    if (!existsSync(file)) throw new UsageError(`no such file: ${positionals[i]}`);
    if (!statSync(file).isFile()) throw new UsageError(`not a file: ${positionals[i]}`);
  }
  const maxLineBytes = positiveIntegerFlag('--max-line-bytes', values['max-line-bytes']);
  const decisionTimeoutMs =
    positiveIntegerFlag('--decision-timeout-ms', values['decision-timeout-ms']) ??
    DEFAULT_DECISION_TIMEOUT_MS;
  const loadTimeoutMs =
    positiveIntegerFlag('--load-timeout-ms', values['load-timeout-ms']) ?? DEFAULT_LOAD_TIMEOUT_MS;
  const report = await replayInWorker(
    {
      mark: WORKER_MARK,
      files,
      policy: values.policy,
      cwd: io.cwd,
      skipBad: values['skip-bad'] === true,
      maxLineBytes,
      maxSkippedShown: MAX_SKIPPED_SHOWN,
      progress: new SharedArrayBuffer(SLOTS * Int32Array.BYTES_PER_ELEMENT),
      conversation: new SharedArrayBuffer(ID_BYTES),
    },
    { decisionTimeoutMs, loadTimeoutMs },
    io,
  );
  io.stdout(formatReport(report));
  if (values.json !== undefined)
    writeFileSync(resolve(io.cwd, values.json), `${JSON.stringify(report, null, 2)}\n`);
  if (values.html !== undefined) writeFileSync(resolve(io.cwd, values.html), renderHtml(report));
  return 0;
}

/** A candidate that took too long: the command stops its worker and exits 2 (see `Timeouts`). */
export class CandidateTimeoutError extends UsageError {
  override name = 'CandidateTimeoutError';
  override readonly code: string = 'ERR_CANDIDATE_TIMEOUT';
}

/** How long the candidate may take, per decision and to load. */
interface Timeouts {
  readonly decisionTimeoutMs: number;
  readonly loadTimeoutMs: number;
}

/**
 * The worker's module, beside this one: `worker.js` when built. Run from the sources (`.ts`) on a
 * Node that does not strip types, the worker starts with tsx registered first (a worker does not
 * inherit the `--import tsx` that runs the command), from a two-line data: module.
 */
function workerUrl(): URL {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return new URL('./worker.js', here);
  const worker = new URL('./worker.ts', here);
  if ((process.features as { typescript?: unknown }).typescript) return worker;
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import { register } from ${JSON.stringify(tsx)};\nregister();\nawait import(${JSON.stringify(worker.href)});\n`;
  return new URL(`data:text/javascript,${encodeURIComponent(code)}`);
}

/**
 * Loads the candidate and replays in a worker thread, keeping time from here: a load past
 * `loadTimeoutMs` (a top-level await that never settles, a loop at the module's top) or one
 * decision past `decisionTimeoutMs` (a check that never returns) stops the worker and throws a
 * `CandidateTimeoutError` naming the module, the export and, for a decision, the conversation
 * and dispatch.
 */
function replayInWorker(
  input: WorkerInput,
  limits: Timeouts,
  io: CommandIo,
): Promise<ReplayReport> {
  const { path, exportName } = parsePolicySpec(input.policy);
  const module = resolve(input.cwd, path);
  const progress = new Int32Array(input.progress);
  const id = new Uint8Array(input.conversation);
  return new Promise((resolvePromise, reject) => {
    let settled = false;
    let loadedExport: string | undefined;
    const worker = new Worker(workerUrl(), { workerData: input, stdout: false, stderr: false });
    const finish = (error: Error | undefined, report?: ReplayReport): void => {
      if (settled) return;
      settled = true;
      clearTimeout(loadTimer);
      clearInterval(watch);
      void worker.terminate();
      if (error !== undefined) reject(error);
      else resolvePromise(report as ReplayReport);
    };
    const exportText = (): string =>
      loadedExport !== undefined
        ? `export \`${loadedExport}\``
        : exportName !== undefined
          ? `export \`${exportName}\``
          : 'its default export (or only termination policy)';
    const loadTimer = setTimeout(() => {
      finish(
        new CandidateTimeoutError(
          `--policy ${input.policy}: loading ${module} for ${exportText()} did not finish within ${limits.loadTimeoutMs} ms (--load-timeout-ms): a top-level await that never settles, or a loop at the module's top?`,
        ),
      );
    }, limits.loadTimeoutMs);
    // Watching the decisions: one that is still running, the same one, after the limit.
    let seen = -1;
    let seenAt = 0;
    const watch = setInterval(
      () => {
        if (Atomics.load(progress, SLOT_DECIDING) !== 1) {
          seen = -1;
          return;
        }
        const generation = Atomics.load(progress, SLOT_GENERATION);
        const now = performance.now();
        if (generation !== seen) {
          seen = generation;
          seenAt = now;
          return;
        }
        if (now - seenAt < limits.decisionTimeoutMs) return;
        const dispatch = Atomics.load(progress, SLOT_DISPATCH);
        const ordinal = Atomics.load(progress, SLOT_ORDINAL);
        const length = Atomics.load(progress, SLOT_ID_LENGTH);
        const conversation =
          dispatch === 0
            ? `conversation ${ordinal} (in the order read)`
            : `conversation ${printable(new TextDecoder().decode(id.slice(0, length)))} (the ${ordinal}${ordinalSuffix(ordinal)} read)`;
        const where = dispatch === 0 ? 'start()' : `the check at dispatch ${dispatch}`;
        finish(
          new CandidateTimeoutError(
            `--policy ${input.policy}: ${exportText()} of ${module}: ${where} of ${conversation} did not return within ${limits.decisionTimeoutMs} ms (--decision-timeout-ms): a loop that never ends?`,
          ),
        );
      },
      Math.max(5, Math.min(200, Math.floor(limits.decisionTimeoutMs / 4))),
    );
    worker.on('message', (message: WorkerMessage) => {
      switch (message.kind) {
        case 'loaded':
          loadedExport = message.exportName;
          clearTimeout(loadTimer);
          return;
        case 'skipped':
          io.stderr(`skipped ${printable(message.message)}\n`);
          return;
        case 'report':
          finish(undefined, message.report as ReplayReport);
          return;
        case 'usage':
          finish(new UsageError(message.message));
          return;
        case 'unexpected':
          finish(new Error(message.message));
          return;
      }
    });
    worker.on('error', (error) => finish(error));
    worker.on('exit', (code) => {
      // Exit code 13: the module's top-level await never settled and nothing was left to wait
      // for. That is a load that never finishes: the load timer reports it, as it does when
      // something keeps the worker waiting.
      if (code === 13 && loadedExport === undefined) return;
      finish(new Error(`the replay's worker exited (code ${code}) before it reported`));
    });
  });
}

function ordinalSuffix(n: number): string {
  const tens = n % 100;
  if (tens >= 11 && tens <= 13) return 'th';
  return ['th', 'st', 'nd', 'rd'][n % 10] ?? 'th';
}

function positiveIntegerFlag(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = /^[0-9]+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1)
    throw new UsageError(`${flag}: expected a positive integer, got \`${text.slice(0, 40)}\``);
  return value;
}

function parse(args: readonly string[]) {
  return parseArgs({
    args: [...args],
    allowPositionals: true,
    strict: true,
    options: {
      policy: { type: 'string' },
      json: { type: 'string' },
      html: { type: 'string' },
      'skip-bad': { type: 'boolean' },
      'max-line-bytes': { type: 'string' },
      'decision-timeout-ms': { type: 'string' },
      'load-timeout-ms': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
