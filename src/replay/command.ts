/**
 * `conversation-orchestrator replay <recording.ndjson…> --policy ./candidate.ts[#export]`: replays
 * recordings against a candidate policy and prints the summary. Mistakes in what it was given (a
 * missing file, a malformed line, a missing export, an export that is not a policy) print one
 * clear line and exit 2; anything else unexpected exits 1.
 */
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadPolicy, UsageError } from './load-policy.ts';
import { RecordingFormatError, readRecordingFiles } from './read.ts';
import { replay } from './replay.ts';
import { formatReport, renderHtml } from './report.ts';
import { describeThrown } from './serialize.ts';

export const USAGE = `usage: conversation-orchestrator replay <recording.ndjson…> --policy <file>[#export] [options]

Replays recorded conversations against a candidate termination policy (no model is called) and
prints what it would have changed.

  --policy <file>[#export]  the module exporting the candidate (default: its default export, or
                            its only exported termination policy); .js/.mjs, or .ts with tsx
                            installed in your project or a Node that strips types
  --json <out.json>         also write the report as JSON
  --html <out.html>         also write a self-contained HTML page (chart and risk list)
  --skip-bad                count and skip lines that are not recorded conversations
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

/** Runs the command line `args` (without `node` and the script); resolves with the exit code. */
export async function runCommand(args: readonly string[], io: CommandIo): Promise<number> {
  try {
    return await run(args, io);
  } catch (error) {
    if (error instanceof UsageError || error instanceof RecordingFormatError) {
      io.stderr(`conversation-orchestrator: ${error.message}\n`);
      return 2;
    }
    io.stderr(`conversation-orchestrator: unexpected failure: ${describeThrown(error)}\n`);
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
  const { policy } = await loadPolicy(values.policy, io.cwd);
  let shown = 0;
  const recordings = readRecordingFiles(files, {
    ...(maxLineBytes === undefined ? {} : { maxLineBytes }),
    skipBad: values['skip-bad'] === true,
    onBadLine: (error) => {
      if (shown++ < MAX_SKIPPED_SHOWN) io.stderr(`skipped ${error.message}\n`);
    },
  });
  const report = await replay(recordings, policy);
  io.stdout(formatReport(report));
  if (values.json !== undefined)
    writeFileSync(resolve(io.cwd, values.json), `${JSON.stringify(report, null, 2)}\n`);
  if (values.html !== undefined) writeFileSync(resolve(io.cwd, values.html), renderHtml(report));
  return 0;
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
      help: { type: 'boolean', short: 'h' },
    },
  });
}
