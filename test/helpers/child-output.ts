/** What a child process writes, gathered as it comes. */
import type { ChildProcess } from 'node:child_process';

/** `out` and `err`: all `child` has written to its stdout and its stderr so far. */
export function outputOf(child: ChildProcess): { readonly out: string; readonly err: string } {
  const output = { out: '', err: '' };
  child.stdout?.on('data', (c: Buffer) => {
    output.out += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    output.err += c.toString();
  });
  return output;
}
