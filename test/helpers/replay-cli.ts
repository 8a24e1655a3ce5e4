/**
 * The `conversation-orchestrator replay` command run as a process from its sources (through tsx,
 * resolved from here, not from the command's working directory).
 */
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';

const CLI = join(resolve(import.meta.dirname, '../..'), 'src/replay/cli.ts');
const TSX = import.meta.resolve('tsx');

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the command with `args` in `cwd`, `nodeFlags` before, killed after `timeoutMs` if given. */
export function runCli(
  args: readonly string[],
  options: {
    readonly cwd: string;
    readonly nodeFlags?: readonly string[];
    readonly timeoutMs?: number;
  },
): Promise<CliRun> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [...(options.nodeFlags ?? []), '--import', TSX, CLI, ...args],
      {
        cwd: options.cwd,
        ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
      },
      (error, stdout, stderr) => {
        done({
          code: error ? (typeof error.code === 'number' ? error.code : 1) : 0,
          stdout,
          stderr,
        });
      },
    );
  });
}
